import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';

/**
 * A child's process tree as Linux shows it in /proc (the process provider's budgets and kills). The run_command child is
 * spawned detached, so it leads its own process group, and everything it starts stays in that group unless it leaves
 * on purpose (setsid, setpgid): the group is "the child's process tree" here.
 */

/** The fields of one /proc/<pid>/stat line the provider uses (proc(5): times in clock ticks). */
export interface ProcStat {
  readonly pid: number;
  readonly comm: string;
  /** R, S, D, Z (zombie: dead, waiting to be reaped), T, … */
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
  readonly utime: number;
  readonly stime: number;
  /** Time of the children this process has waited for. */
  readonly cutime: number;
  readonly cstime: number;
}

/**
 * Parses one /proc/<pid>/stat line, or answers undefined when it is not one. The command name (field 2) is in
 * parentheses and may itself hold spaces and parentheses, so the fields after it are read from its last `)`.
 */
export function parseProcStat(line: string): ProcStat | undefined {
  const open = line.indexOf(' (');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const pid = Number(line.slice(0, open));
  const rest = line
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state); field n is rest[n - 3].
  if (!Number.isInteger(pid) || pid <= 0 || rest.length < 15 || !/^[A-Za-z]$/.test(rest[0])) return undefined;
  const field = (n: number): number => Number(rest[n - 3]);
  const stat: ProcStat = {
    pid,
    comm: line.slice(open + 2, close),
    state: rest[0],
    ppid: field(4),
    pgrp: field(5),
    utime: field(14),
    stime: field(15),
    cutime: field(16),
    cstime: field(17),
  };
  const numbers = [stat.ppid, stat.pgrp, stat.utime, stat.stime, stat.cutime, stat.cstime];
  return numbers.every((n) => Number.isInteger(n) && n >= 0) ? stat : undefined;
}

/** The CPU time of one process and of its waited-for children, in clock ticks. */
export function cpuTicksOf(stat: ProcStat): number {
  return stat.utime + stat.stime + stat.cutime + stat.cstime;
}

/**
 * The CPU time of a process group in milliseconds: the sum over its live members (zombies too: their time is not yet
 * in a parent's cutime) of utime + stime + cutime + cstime. A member that exits and is waited for moves its time into
 * its parent's cutime, so the sum does not drop then (a member reaped by init, outside the group, takes its time away:
 * the caller keeps the highest sum seen).
 */
export function groupCpuMs(stats: readonly ProcStat[], pgid: number, ticksPerSecond: number): number {
  let ticks = 0;
  for (const stat of stats) if (stat.pgrp === pgid) ticks += cpuTicksOf(stat);
  return Math.round((ticks * 1000) / ticksPerSecond);
}

/** The members of a process group that still run (a zombie is dead: only its parent's wait, or init's, is missing). */
export function liveMembers(stats: readonly ProcStat[], pgid: number): ProcStat[] {
  return stats.filter((s) => s.pgrp === pgid && s.state !== 'Z' && s.state !== 'X');
}

let ticksPerSecond: number | undefined;

/** USER_HZ, the unit of /proc's times (`getconf CLK_TCK`, read once; 100 on every Linux we know of). */
export function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    ticksPerSecond = 100;
    try {
      const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 2_000 }).trim());
      if (Number.isInteger(n) && n > 0) ticksPerSecond = n;
    } catch {
      /* no getconf: 100 */
    }
  }
  return ticksPerSecond;
}

/** Whether /proc can be read here (Linux); elsewhere budget_cpu_ms has only the RLIMIT_CPU backstop, if any. */
export async function procAvailable(): Promise<boolean> {
  try {
    await fsp.access('/proc/self/stat');
    return true;
  } catch {
    return false;
  }
}

/**
 * Every process's stat line that can be read now (a process may end between the listing and the read: skipped).
 * One readdir of /proc and one small read per process.
 */
export async function readAllProcStats(): Promise<ProcStat[]> {
  let names: string[];
  try {
    names = await fsp.readdir('/proc');
  } catch {
    return [];
  }
  const stats = await Promise.all(
    names
      .filter((n) => /^\d+$/.test(n))
      .map(async (n) => {
        try {
          return parseProcStat(await fsp.readFile(`/proc/${n}/stat`, 'utf8'));
        } catch {
          return undefined;
        }
      }),
  );
  return stats.filter((s): s is ProcStat => s !== undefined);
}

/**
 * Reads one process group's members from /proc, repeatedly and cheaply: the first read looks at every process; later
 * reads list /proc (one readdir) and read the stat of the group's members and of processes not seen before only, since a
 * process seen outside the group stays outside (a process joins another group only by setpgid within its session, which
 * a command's children do not do to ours). A pid that disappears from the listing is forgotten, so a reused pid is read
 * again; only a pid that ends and is reused between two reads is missed, and every `fullEvery` reads all are read again.
 * `existing`: the pids listed before the group's leader was spawned, none of which can be in the new group (Linux never
 * hands out a pid still in use as a process group id), so that even the first read is cheap.
 */
export class ProcessGroupReader {
  private readonly outside = new Set<number>();
  /** Pids seen as members (the group or a descendant): their children are members too. */
  private readonly inside = new Set<number>();
  private reads = 0;

  constructor(
    readonly pgid: number,
    existing: Iterable<number> = [],
    private readonly fullEvery = 100,
  ) {
    for (const pid of existing) if (pid !== pgid) this.outside.add(pid);
  }

  /** The group's members (zombies included: groupCpuMs counts them, liveMembers leaves them out). */
  async members(): Promise<ProcStat[]> {
    if (++this.reads % this.fullEvery === 0) this.outside.clear();
    let names: string[];
    try {
      names = await fsp.readdir('/proc');
    } catch {
      return [];
    }
    const listed = new Set<number>();
    const toRead: number[] = [];
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const pid = Number(name);
      listed.add(pid);
      if (!this.outside.has(pid)) toRead.push(pid);
    }
    for (const pid of this.outside) if (!listed.has(pid)) this.outside.delete(pid);
    const stats = await Promise.all(
      toRead.map(async (pid) => {
        try {
          return parseProcStat(await fsp.readFile(`/proc/${pid}/stat`, 'utf8'));
        } catch {
          return undefined;
        }
      }),
    );
    // Members: the group, and every descendant of a member or of a process once seen inside, whatever it did to its
    // session or group (setsid, setpgid): a child is first seen with a member's pid as its parent.
    const read = stats.filter((s): s is ProcStat => s !== undefined);
    const members: ProcStat[] = [];
    let grew = true;
    const taken = new Set<number>();
    while (grew) {
      grew = false;
      for (const stat of read) {
        if (taken.has(stat.pid)) continue;
        if (
          stat.pgrp === this.pgid ||
          stat.pid === this.pgid ||
          this.inside.has(stat.pid) ||
          this.inside.has(stat.ppid)
        ) {
          taken.add(stat.pid);
          this.inside.add(stat.pid);
          members.push(stat);
          grew = true;
        }
      }
    }
    for (const pid of this.inside) if (!listed.has(pid)) this.inside.delete(pid);
    for (const stat of read) if (!taken.has(stat.pid)) this.outside.add(stat.pid);
    return members;
  }
}

/** The pids /proc lists now (empty without /proc). */
export async function listPids(): Promise<number[]> {
  try {
    return (await fsp.readdir('/proc')).filter((n) => /^\d+$/.test(n)).map(Number);
  } catch {
    return [];
  }
}

/** The process group's members that still run, read from /proc now. */
export async function processGroupMembers(pgid: number): Promise<ProcStat[]> {
  return liveMembers(await readAllProcStats(), pgid);
}

/** The CPU time of `stats` (a ProcessGroupReader's members, descendants that left the group included), in ms. */
export function membersCpuMs(stats: readonly ProcStat[], ticksPerSecond: number): number {
  let ticks = 0;
  for (const stat of stats) ticks += cpuTicksOf(stat);
  return Math.round((ticks * 1000) / ticksPerSecond);
}

/** SIGKILLs each pid (members that left the group); ESRCH ignored. */
export function killPids(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** Sends `signal` to every process of the group; answers false when none was left (ESRCH). */
export function killProcessGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
