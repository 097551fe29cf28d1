import * as vscode from 'vscode';
import { Commands } from './contributions';
import { storeWarning } from './routerSettings';

export type StatusBarState =
  | { readonly kind: 'stopped'; readonly reason?: string }
  /** `after`: why the previous coordinator worker ended, when this start is its restart. */
  | { readonly kind: 'starting'; readonly after?: string }
  | {
      readonly kind: 'serving';
      readonly host: string;
      readonly port: number;
      readonly agents: number;
      readonly online: number;
      /** sw4rm.auth of the running coordinator: with `none`, any local process can act as any agent. */
      readonly auth: 'token' | 'none';
      /** Dead letters not yet requeued. */
      readonly deadLetters: number;
      /** HITL invocations waiting for a human. */
      readonly approvals: number;
      /** The store's size against its disk budget, when known. */
      readonly store?: { readonly bytes: number; readonly budget: number };
    };

/**
 * The status bar item: the port, the number of agents, of dead letters and of pending approvals, or why the
 * coordinator is not running.
 */
export class CoordinatorStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('sw4rm.status', vscode.StatusBarAlignment.Left, 50);

  constructor() {
    this.item.name = 'SW4RM Coordinator';
    this.item.command = Commands.showLog;
    this.show({ kind: 'stopped' });
    this.item.show();
  }

  show(state: StatusBarState): void {
    this.item.accessibilityInformation = undefined;
    switch (state.kind) {
      case 'stopped':
        this.item.text = '$(debug-disconnect) SW4RM stopped';
        this.item.tooltip = state.reason
          ? `SW4RM coordinator stopped: ${state.reason}`
          : 'SW4RM coordinator is not running';
        this.item.backgroundColor = state.reason ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
        break;
      case 'starting':
        this.item.text = state.after ? '$(loading~spin) SW4RM restarting' : '$(loading~spin) SW4RM starting';
        this.item.tooltip = state.after
          ? `SW4RM coordinator is restarting from its store: its worker ended (${state.after})`
          : 'SW4RM coordinator is starting';
        this.item.backgroundColor = state.after ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
        break;
      case 'serving': {
        const agents = plural(state.agents, 'agent');
        const deadLetters = state.deadLetters > 0 ? plural(state.deadLetters, 'dead letter') : '';
        const approvals = state.approvals > 0 ? `${plural(state.approvals, 'approval')} pending` : '';
        const authNone = state.auth === 'none';
        const store = storeWarning(state.store);
        this.item.text =
          `$(radio-tower) SW4RM :${state.port}${authNone ? ' · $(unlock) auth none' : ''} · ${agents}` +
          `${deadLetters ? ` · ${deadLetters}` : ''}` +
          (approvals ? ` · $(bell) ${state.approvals}` : '') +
          (store ? ` · ${store.text}` : '');
        this.item.tooltip =
          `SW4RM coordinator on ${state.host}:${state.port}\n` +
          (authNone ? `${AUTH_NONE_WARNING} (sw4rm.auth is "none": no credential is checked)\n` : '') +
          `${agents} registered, ${state.online} connected\n` +
          (approvals ? `${approvals}: see the Approvals view\n` : '') +
          (deadLetters ? `${deadLetters}: see the Dead Letters view\n` : '') +
          (store ? `${store.tooltip}\n` : '') +
          'Click to show the log';
        this.item.accessibilityInformation = {
          label: `SW4RM coordinator on port ${state.port}${authNone ? ', auth none' : ''}, ${agents}${deadLetters ? `, ${deadLetters}` : ''}${approvals ? `, ${approvals}` : ''}${store ? `, ${store.text}` : ''}`,
        };
        this.item.backgroundColor =
          deadLetters || authNone || store ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
        break;
      }
    }
  }

  dispose(): void {
    this.item.dispose();
  }
}

/** What auth `none` means, said plainly wherever it shows. */
export const AUTH_NONE_WARNING = 'Any local process can act as any agent';

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
