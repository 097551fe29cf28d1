/** The URI scheme of the read-only router metrics document (a TextDocumentContentProvider). */
export const METRICS_SCHEME = 'sw4rm-metrics';

/**
 * The metrics document: a comment saying what it is and when it was read, then the router's back-pressure metrics in
 * the Prometheus text format (comment lines are part of that format, so the whole text can be scraped or diffed).
 * Without metrics (the coordinator is not running) it says so.
 */
export function metricsDocumentText(
  metrics: string | undefined,
  now: number,
  use: 'document' | 'export' = 'document',
): string {
  const when = new Date(now).toISOString();
  if (metrics === undefined) {
    return `# SW4RM router metrics: the coordinator is not running (${when}).\n# Start it (SW4RM: Start Coordinator); this document refreshes by itself.\n`;
  }
  return (
    `# SW4RM router metrics per agent, read ${when}.\n` +
    (use === 'document' ? '# Refreshes while open; Copy and Export are on the title bar.\n' : '') +
    metrics
  );
}

/** `sw4rm-router-metrics-2025-01-02T03-04-05Z.prom` */
export function metricsExportFileName(now: number): string {
  return `sw4rm-router-metrics-${new Date(now)
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/:/g, '-')}.prom`;
}
