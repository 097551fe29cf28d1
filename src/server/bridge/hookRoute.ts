import type { BridgeHttpRoute } from './model';

/** The PreToolUse hook endpoint (README, "Approvals for CLI agents"). Built by the approvals helper. */
export const HOOK_ROUTES: readonly BridgeHttpRoute[] = [];
