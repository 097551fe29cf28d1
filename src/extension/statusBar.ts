import * as vscode from 'vscode';
import { Commands } from './contributions';

export type StatusBarState =
  | { readonly kind: 'stopped'; readonly reason?: string }
  | { readonly kind: 'starting' }
  | { readonly kind: 'serving'; readonly host: string; readonly port: number; readonly agents: number; readonly online: number };

/** The status bar item: the port and the number of agents, or why the coordinator is not running. */
export class CoordinatorStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('sw4rm.status', vscode.StatusBarAlignment.Left, 50);

  constructor() {
    this.item.name = 'SW4RM Coordinator';
    this.item.command = Commands.showLog;
    this.show({ kind: 'stopped' });
    this.item.show();
  }

  show(state: StatusBarState): void {
    switch (state.kind) {
      case 'stopped':
        this.item.text = '$(debug-disconnect) SW4RM stopped';
        this.item.tooltip = state.reason ? `SW4RM coordinator stopped: ${state.reason}` : 'SW4RM coordinator is not running';
        this.item.backgroundColor = state.reason ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
        break;
      case 'starting':
        this.item.text = '$(loading~spin) SW4RM starting';
        this.item.tooltip = 'SW4RM coordinator is starting';
        this.item.backgroundColor = undefined;
        break;
      case 'serving': {
        const agents = `${state.agents} agent${state.agents === 1 ? '' : 's'}`;
        this.item.text = `$(radio-tower) SW4RM :${state.port} · ${agents}`;
        this.item.tooltip = `SW4RM coordinator on ${state.host}:${state.port}\n${agents} registered, ${state.online} connected\nClick to show the log`;
        this.item.backgroundColor = undefined;
        break;
      }
    }
  }

  dispose(): void {
    this.item.dispose();
  }
}
