// Driving VS Code's workbench in a page, as a user does: commands, views and their rows, context menus, quick
// inputs and quick picks, dialogs, and the text they show. CodeServerHarness (harness.ts) extends Workbench with
// the code-server process and the browser around the page; the tests use these helpers, not copies of their own.
//
// Every helper waits on the workbench's state (what the page shows), never on time. A key that answers something
// goes to that thing's own element (the quick input's box, the menu's item), never to whatever has the focus: a
// page that takes the focus as it loads (the walkthrough's step content does) would swallow it.
//
// The project compiles without the DOM library, so code that runs in the page declares the little it reads.

import type { Frame, Locator, Page } from 'playwright-core';

export interface PollOptions {
  timeoutMs?: number;
  intervalMs?: number;
  description?: string;
}

/** Thrown by a poll probe to stop polling at once and fail with this error. */
export class PollAbortError extends Error {
  override readonly name = 'PollAbortError';
}

/**
 * Calls probe until it returns something other than undefined, null or false, or the deadline passes.
 * A probe that throws is called again, unless it throws a PollAbortError.
 */
export async function poll<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: PollOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 200;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) {
        return value;
      }
    } catch (error) {
      if (error instanceof PollAbortError) {
        throw error;
      }
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const what = options.description ?? 'condition';
      const cause = lastError instanceof Error ? `: last error: ${lastError.message}` : '';
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${cause}`);
    }
    await delay(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function normalize(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function cssString(text: string): string {
  return text.replace(/["\\]/g, '\\$&');
}

/** What a test sees of the quick input (read in the page by QUICK_INPUT_STATE). */
interface QuickInputState {
  /** Shown (not hidden, not closing). */
  readonly visible: boolean;
  /** How often it was hidden since the page was first read: a quick input closed and opened again counts. */
  readonly hides: number;
  /** How many Enter key presses reached its box. */
  readonly enters: number;
  readonly title: string;
  readonly value: string;
  readonly message: string;
  /** Title, placeholder, value and the rows listed: a change says a step was taken. */
  readonly identity: string;
  readonly focused: boolean;
  /** The element that has the focus, as tag#id.classes. */
  readonly active: string;
}

/** The little of the page's elements that QUICK_INPUT_STATE reads. */
interface PageElement {
  readonly tagName: string;
  readonly id: string;
  readonly className: unknown;
  readonly textContent: string | null;
  getAttribute(name: string): string | null;
}
interface PageInput extends PageElement {
  readonly value: string;
  readonly placeholder: string;
  addEventListener(type: 'keydown', listener: (event: { readonly key: string }) => void, capture: boolean): void;
}
interface QuickInputWidget extends PageElement {
  readonly style: { readonly display: string };
  readonly classList: { contains(name: string): boolean };
  readonly ownerDocument: { readonly activeElement: PageElement | null };
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
  sw4rmE2e?: { hides: number; enters: number; input: PageInput | null };
}
type PageObserver = new (callback: () => void) => {
  observe(target: unknown, options: { attributes: boolean; attributeFilter: string[] }): void;
};

/**
 * Reads the quick input widget in the page. The first read puts two counters on it that later reads answer: how
 * often it was hidden (a MutationObserver on its style and class: hiding sets `display: none`, or the closing class
 * while it animates) and how many Enter key presses reached its box (a capturing listener on the box).
 */
const QUICK_INPUT_STATE = (widget: QuickInputWidget): QuickInputState => {
  const hidden = (): boolean =>
    widget.style.display === 'none' || widget.classList.contains('quick-input-widget-closing');
  if (widget.sw4rmE2e === undefined) {
    const counters = { hides: 0, enters: 0, input: null };
    widget.sw4rmE2e = counters;
    let wasHidden = hidden();
    const Observer = (globalThis as unknown as { MutationObserver: PageObserver }).MutationObserver;
    new Observer(() => {
      const now = hidden();
      if (now && !wasHidden) counters.hides++;
      wasHidden = now;
    }).observe(widget, { attributes: true, attributeFilter: ['style', 'class'] });
  }
  const counters = widget.sw4rmE2e;
  const input = widget.querySelector('.quick-input-box input') as PageInput | null;
  if (input !== null && counters.input !== input) {
    counters.input = input;
    input.addEventListener(
      'keydown',
      (event) => {
        if (event.key === 'Enter') counters.enters++;
      },
      true,
    );
  }
  const text = (selector: string): string => (widget.querySelector(selector)?.textContent ?? '').trim();
  const rows = Array.from(widget.querySelectorAll('.quick-input-list .monaco-list-row'))
    .slice(0, 12)
    .map((row) => row.getAttribute('aria-label') ?? row.textContent ?? '');
  const active = widget.ownerDocument.activeElement;
  const classes =
    active && typeof active.className === 'string'
      ? active.className.trim().split(/\s+/).filter(Boolean).slice(0, 4)
      : [];
  const title = text('.quick-input-title');
  const value = input?.value ?? '';
  return {
    visible: !hidden(),
    hides: counters.hides,
    enters: counters.enters,
    title,
    value,
    message: text('.quick-input-message'),
    identity: JSON.stringify([title, input?.placeholder ?? '', value, rows]),
    focused: active !== null && active === input,
    active: active
      ? `${active.tagName.toLowerCase()}${active.id ? `#${active.id}` : ''}${classes.map((c) => `.${c}`).join('')}`
      : 'nothing',
  };
};

function describeQuickInput(state: QuickInputState | undefined): string {
  if (state === undefined) return 'the quick input could not be read';
  return (
    `the quick input ${state.visible ? 'shows' : 'is hidden; it showed'} title "${state.title}", value "${state.value}", message "${state.message}"; ` +
    `focus on ${state.active}; Enter reached its box ${state.enters} time(s)`
  );
}

export class Workbench {
  constructor(readonly page: Page) {}

  // ---- Commands ------------------------------------------------------------------------------------------------

  /** Runs a command by its title (as shown in the command palette, e.g. 'SW4RM: Start Coordinator'). */
  async runCommand(title: string, timeoutMs = 30_000): Promise<void> {
    const input = this.quickInputBox();
    await this.dismissQuickInput();
    // The workbench may not have keyboard focus right after loading; try F1 and then Ctrl+Shift+P.
    const keys = ['F1', 'Control+Shift+P'];
    let attempt = 0;
    // The palette may close again right after it opened (a webview or a notification taking focus makes it inert,
    // then hides it): then it is opened and filled again.
    const openWithTitle = async (): Promise<boolean> => {
      if (!(await input.isVisible())) {
        await this.page.keyboard.press(keys[attempt++ % keys.length]);
        await input.waitFor({ state: 'visible', timeout: 3_000 });
      }
      if ((await input.inputValue({ timeout: 1_000 })) !== `>${title}`)
        await input.fill(`>${title}`, { timeout: 3_000 });
      return (await input.inputValue({ timeout: 1_000 })) === `>${title}`;
    };
    const row = this.page.locator('.quick-input-list .monaco-list-row');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = Math.max(deadline - Date.now(), 1_000);
      await poll(openWithTitle, { timeoutMs: left, description: `the command palette to open with "${title}"` });
      // The command is the row whose label starts with the title; another command that also matches may rank first
      // (e.g. "Show Agent's Log Events" for "Show Log"), so the matching row is chosen, not the first one.
      const index = await poll(
        async () => {
          if (!(await openWithTitle())) return false;
          const count = await row.count();
          for (let i = 0; i < count; i++) {
            const candidate = row.nth(i);
            if (!(await candidate.isVisible())) continue;
            const label = (await candidate.getAttribute('aria-label')) ?? (await candidate.innerText());
            if (normalize(label).toLowerCase().startsWith(normalize(title).toLowerCase())) return i + 1;
          }
          return false;
        },
        { timeoutMs: left, description: `the command palette to list "${title}"` },
      );
      const before = await this.quickInputState();
      for (let i = 1; i < index; i++) await input.press('ArrowDown');
      await input.press('Enter');
      // Enter ran the command only if it reached the palette's box. A page that takes the focus meanwhile (the
      // walkthrough's step content does, as it loads) gets the key instead, and the palette closes on the focus loss
      // without running anything: then it is opened and the command chosen again. Enter is never sent twice to a
      // palette it reached, so a command is never run twice.
      const outcome =
        before === undefined
          ? 'reached'
          : await poll(
              async () => {
                const now = await this.quickInputState();
                if (now === undefined || now.enters > before.enters) return 'reached';
                if (!now.visible || now.hides > before.hides) return 'lost';
                await input.press('Enter', { timeout: 1_000 }).catch(() => undefined);
                return false;
              },
              {
                timeoutMs: Math.max(deadline - Date.now(), 1_000),
                intervalMs: 250,
                description: `Enter to reach the command palette showing "${title}"`,
              },
            );
      if (outcome === 'reached') break;
      if (Date.now() > deadline)
        throw new Error(`The command palette closed before it ran "${title}" (a page took the focus)`);
    }
    // The palette closes, or is reused by a quick pick that the command opens itself (or the page reloads:
    // hence the short timeout, so that a palette gone with the old page does not hold the check).
    await poll(
      async () =>
        !(await input.isVisible()) || (await input.inputValue({ timeout: 1_000 }).catch(() => '')) !== `>${title}`,
      {
        timeoutMs,
        description: `the command palette to run "${title}"`,
      },
    );
  }

  /** Opens a new integrated terminal and runs `commandLine` in it: the keys go to the terminal's own input. */
  async runInNewTerminal(commandLine: string): Promise<void> {
    await this.runCommand('Terminal: Create New Terminal');
    const terminalInput = this.page
      .locator('.terminal-wrapper.active .xterm-helper-textarea, .terminal .xterm-helper-textarea')
      .first();
    await terminalInput.waitFor({ state: 'attached', timeout: 30_000 });
    await terminalInput.pressSequentially(commandLine);
    await terminalInput.press('Enter');
  }

  // ---- Views ---------------------------------------------------------------------------------------------------

  /** Opens a view container from the activity bar by its title (its aria-label), e.g. 'SW4RM'. */
  async openViewContainer(title: string, timeoutMs = 30_000): Promise<void> {
    const item = this.page
      .locator('.part.activitybar .action-item, .part.sidebar .composite-bar .action-item')
      .filter({ has: this.page.locator(`a[aria-label="${cssString(title)}"], a[aria-label^="${cssString(title)} ("]`) })
      .first();
    await item.waitFor({ state: 'visible', timeout: timeoutMs });
    // Clicking the item of the container that is already shown would hide the side bar.
    const active = async () =>
      (await item.getAttribute('class'))?.split(/\s+/).includes('checked') === true ||
      (await item.locator('a').first().getAttribute('aria-pressed')) === 'true';
    if (!(await active())) {
      await item.click();
    }
    await poll(
      async () => {
        const header = this.page.locator('.part.sidebar .composite.title');
        const text = (await header.count()) > 0 ? await header.first().innerText() : '';
        return (await active()) && text.toLowerCase().includes(title.toLowerCase());
      },
      { timeoutMs, description: `the view container "${title}" to open` },
    );
  }

  /** The pane of the view whose header shows `title`, e.g. 'Agents'. */
  pane(title: string): Locator {
    return this.page.locator('.pane').filter({ has: this.page.locator('.pane-header', { hasText: title }) });
  }

  /** The first row of the view titled `viewTitle` that shows `rowText`. */
  viewRow(viewTitle: string, rowText: string | RegExp): Locator {
    return this.pane(viewTitle).locator('.monaco-list-row', { hasText: rowText }).first();
  }

  /** Clicks the row of the view titled `viewTitle` that shows `rowText` once it is shown (a row opens its details). */
  async clickViewRow(viewTitle: string, rowText: string, timeoutMs = 15_000): Promise<void> {
    const row = this.viewRow(viewTitle, rowText);
    await row.waitFor({ state: 'visible', timeout: timeoutMs });
    await row.click();
  }

  /**
   * The text of the view bodies (`.pane-body`) that are shown. With viewTitle, only the view whose
   * header has that title; a container with a single view hides that header but keeps its title.
   */
  async viewText(viewTitle?: string): Promise<string> {
    const panes = viewTitle === undefined ? this.page.locator('.pane') : this.pane(viewTitle);
    const texts = await panes.locator('.pane-body').allInnerTexts();
    return texts.join('\n');
  }

  /** Expands the views of the side bar titled as named and collapses every other one (room, and a clean screenshot). */
  async showOnly(...titles: string[]): Promise<void> {
    for (const header of await this.page.locator('.part.sidebar .pane-header').all()) {
      const title = (await header.innerText()).split('\n')[0].trim();
      await this.setExpanded(
        header,
        titles.some((t) => title.toLowerCase() === t.toLowerCase()),
        title,
      );
    }
  }

  /** Collapses the views titled as named, leaving the others as they are. */
  async collapseViews(...titles: string[]): Promise<void> {
    for (const title of titles) await this.setExpanded(this.pane(title).locator('.pane-header').first(), false, title);
  }

  private async setExpanded(header: Locator, expanded: boolean, title: string): Promise<void> {
    const isExpanded = async () => (await header.getAttribute('aria-expanded')) === 'true';
    if ((await isExpanded()) === expanded) return;
    await header.click();
    await poll(async () => (await isExpanded()) === expanded, {
      timeoutMs: 5_000,
      description: `the view "${title}" to ${expanded ? 'expand' : 'collapse'}`,
    });
  }

  /**
   * Drags the side bar's edge to `width` pixels (or to what `width` answers for its width now), so that rows show
   * their descriptions whole; then moves the mouse away (below the views, right of the side bar: no sash, no row) and
   * waits until the sash is no longer highlighted, its fading included (a screenshot would show it).
   */
  async sideBarWidth(width: number | ((current: number) => number)): Promise<void> {
    const box = await this.page.locator('.part.sidebar').boundingBox();
    if (!box) throw new Error('the side bar is not shown: its width cannot be set');
    const target = typeof width === 'number' ? width : width(box.width);
    const y = box.y + box.height / 2;
    await this.page.mouse.move(box.x + box.width + 1, y);
    await this.page.mouse.down();
    await this.page.mouse.move(box.x + target, y, { steps: 8 });
    await this.page.mouse.up();
    await this.page.mouse.move(box.x + target + 300, box.y + box.height - 100);
    await poll(
      async () =>
        (await this.page.locator('.monaco-sash.hover, .monaco-sash.active').count()) === 0 &&
        (await this.page.evaluate(SASH_ANIMATIONS)) === 0,
      { timeoutMs: 5_000, description: "the side bar's sash to stop being highlighted" },
    );
  }

  /** Runs `item` from the context menu of the row of `viewTitle` that shows `rowText`. */
  async contextMenu(viewTitle: string, rowText: string, item: string): Promise<void> {
    await this.contextMenuOf(this.viewRow(viewTitle, rowText), item);
  }

  /** Runs `item` from the context menu of `row`. */
  async contextMenuOf(row: Locator, item: string): Promise<void> {
    await row.click({ button: 'right' });
    const action = this.page.locator('.context-view .monaco-menu .action-item', { hasText: item }).first();
    await action.waitFor({ state: 'visible', timeout: 10_000 });
    // The workbench's menu ignores a click that follows its opening too closely; the keyboard is deterministic.
    await poll(
      async () => {
        if ((await action.getAttribute('class'))?.split(/\s+/).includes('focused')) return true;
        await this.page.keyboard.press('ArrowDown');
        return false;
      },
      { timeoutMs: 5_000, description: `the "${item}" menu item to have the focus` },
    );
    // Enter goes to the item itself (it has the focus now; a page that took it meanwhile would swallow a key sent to the page).
    await action.press('Enter');
    await action.waitFor({ state: 'hidden', timeout: 10_000 });
  }

  // ---- Quick inputs and quick picks ----------------------------------------------------------------------------

  /** The quick input's box: the text field of an input box, a quick pick's filter, the command palette's line. */
  quickInputBox(): Locator {
    return this.page.locator('.quick-input-widget .quick-input-box input');
  }

  /** Waits for a quick input whose title shows `title`, e.g. 'Submit Task (2/4)'. */
  async quickInputTitled(title: string, timeoutMs = 15_000): Promise<void> {
    const shown = this.page.locator('.quick-input-widget .quick-input-title');
    await this.waitForText(
      (t) => t.includes(title),
      timeoutMs,
      async () => ((await shown.isVisible()) ? await shown.innerText() : ''),
    );
  }

  /**
   * Waits for a quick input (an input box or a quick pick) titled `title`, types `text` over what it holds (if given)
   * and accepts it: an input box its value, a quick pick its active row.
   */
  async answerQuickInput(title: string, text?: string, timeoutMs = 15_000): Promise<void> {
    await this.quickInputTitled(title, timeoutMs);
    if (text !== undefined) await this.quickInputBox().fill(text);
    await this.acceptQuickInput(timeoutMs);
  }

  /**
   * Answers an input box a command opened with a proposed value: types `value` over the proposal (or keeps it) and
   * accepts it. Answers the value it proposed.
   */
  async answerInputBox(value?: string, timeoutMs = 15_000): Promise<string> {
    const input = this.quickInputBox();
    const proposed = await poll(
      async () => {
        if (!(await input.isVisible())) return false;
        const current = await input.inputValue({ timeout: 1_000 });
        return current === '' || current.startsWith('>') ? false : current;
      },
      { timeoutMs, description: 'an input box with a proposed value' },
    );
    if (value !== undefined) await input.fill(value);
    await this.acceptQuickInput(timeoutMs);
    return proposed;
  }

  /** Accepts the path a save dialog (in code-server, a quick input holding it) proposes, once it matches `path`. */
  async acceptSaveDialog(path: RegExp, timeoutMs = 10_000): Promise<void> {
    await this.waitForText(
      (t) => path.test(t),
      timeoutMs,
      () => this.quickInputBox().inputValue(),
    );
    await this.acceptQuickInput();
  }

  /**
   * Chooses the row of the quick pick shown that shows `text`, and waits for the pick to take it (it closes, or
   * shows its next step). The click goes to the row itself, so a page that has the focus cannot take it.
   */
  async chooseQuickPick(text: string, timeoutMs = 15_000, filter?: { readonly title: string }): Promise<void> {
    // A long list shows only the rows that fit: a person types to find one further down, and so does this (once the
    // pick titled `title` shows, so that the text never reaches the command palette's line before it).
    if (filter) {
      await this.quickInputTitled(filter.title, timeoutMs);
      await this.quickInputBox().fill(text);
    }
    const row = this.page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: text }).first();
    await row.waitFor({ state: 'visible', timeout: timeoutMs });
    const before = await this.quickInputState();
    await row.click();
    let last = before;
    try {
      await poll(
        async () => {
          last = await this.quickInputState();
          return before === undefined || last === undefined || movedOn(before, last);
        },
        { timeoutMs, description: `the quick pick to take "${text}"` },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${describeQuickInput(last)}`);
    }
  }

  /**
   * Accepts the quick input shown with Enter, and waits for it to move on: it closes, or shows its next step. The
   * key goes to the quick input's box itself, never to whatever has the focus: a box that stays open on focus loss
   * (`ignoreFocusOut`) keeps waiting when a page that took the focus meanwhile (the walkthrough's step content does,
   * as it loads) swallows a key sent to the page. Enter is sent again only while none has reached the box, so an
   * answer is never given twice; a timeout says what the box showed and where the focus was.
   */
  async acceptQuickInput(timeoutMs = 15_000): Promise<void> {
    await this.enterInQuickInput(true, timeoutMs);
  }

  /** Sends Enter to the quick input's box until it has reached it, without waiting for more (a refused value stays). */
  async pressEnterInQuickInput(timeoutMs = 15_000): Promise<void> {
    await this.enterInQuickInput(false, timeoutMs);
  }

  /** Closes the quick input shown, if any, with Escape sent to its box. */
  async dismissQuickInput(): Promise<void> {
    const widget = this.page.locator('.quick-input-widget');
    if (await widget.isVisible().catch(() => false)) {
      await this.quickInputBox()
        .press('Escape', { timeout: 5_000 })
        .catch(() => this.page.keyboard.press('Escape'));
      await poll(async () => !(await widget.isVisible()), {
        timeoutMs: 5_000,
        description: 'the quick input to close',
      });
    }
  }

  private async enterInQuickInput(untilMovedOn: boolean, timeoutMs: number): Promise<void> {
    const before = await this.quickInputState();
    if (before === undefined || !before.visible)
      throw new Error(`No quick input is shown to take Enter; ${describeQuickInput(before)}`);
    const input = this.quickInputBox();
    await input.press('Enter', { timeout: timeoutMs });
    let last: QuickInputState | undefined = before;
    try {
      await poll(
        async () => {
          last = await this.quickInputState();
          if (last === undefined) return false;
          if (movedOn(before, last)) return true;
          if (last.enters > before.enters) return !untilMovedOn;
          // No Enter reached the box: a page that took the focus had it. The box gets the focus back and the key again.
          await input.press('Enter', { timeout: 1_000 }).catch(() => undefined);
          return false;
        },
        {
          timeoutMs,
          intervalMs: 500,
          description: untilMovedOn
            ? `the quick input "${before.title}" to take Enter and move on`
            : `Enter to reach the quick input "${before.title}"`,
        },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${describeQuickInput(last)}`);
    }
  }

  private async quickInputState(): Promise<QuickInputState | undefined> {
    return await this.page
      .locator('.quick-input-widget')
      .first()
      .evaluate(QUICK_INPUT_STATE, undefined, { timeout: 1_000 })
      .catch(() => undefined);
  }

  // ---- Dialogs -------------------------------------------------------------------------------------------------

  /** Waits for a modal dialog, presses its button labelled `button`, waits for it to close, and answers its text. */
  async answerDialog(button: string, timeoutMs = 15_000): Promise<string> {
    const dialog = this.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible', timeout: timeoutMs });
    const text = normalize(await dialog.innerText());
    await dialog
      .locator('.monaco-button', { hasText: new RegExp(`^${button.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) })
      .click();
    await dialog.waitFor({ state: 'hidden', timeout: timeoutMs });
    return text;
  }

  // ---- Text ----------------------------------------------------------------------------------------------------

  /** The text of the status bar items. */
  async statusBarText(): Promise<string> {
    const items = await this.page.locator('.part.statusbar .statusbar-item').allInnerTexts();
    return items
      .map((text) => normalize(text))
      .filter((text) => text.length > 0)
      .join('\n');
  }

  /** The text of the whole workbench. */
  async workbenchText(): Promise<string> {
    return await this.page.locator('.monaco-workbench').first().innerText();
  }

  /** The text of the editors shown (Monaco renders spaces as no-break spaces: they are spaces here). */
  async editorText(): Promise<string> {
    return (await this.page.locator('.editor-instance .view-lines').allInnerTexts()).join('\n').replace(/\u00a0/g, ' ');
  }

  /**
   * Polls a text source (the whole workbench unless given) until predicate accepts it, and returns
   * that text.
   */
  async waitForText(
    predicate: (text: string) => boolean,
    timeoutMs = 30_000,
    source: () => Promise<string> = () => this.workbenchText(),
  ): Promise<string> {
    let last = '';
    try {
      return await poll(
        async () => {
          last = await source();
          return predicate(last) ? last : false;
        },
        { timeoutMs, description: 'the expected text' },
      );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`${message}\nLast text seen:\n${last.slice(0, 4000)}`);
    }
  }

  /** The webview frame (webviews live in nested iframes) whose `#content` shows `text`, e.g. an approval panel. */
  async webviewFrameShowing(text: string, timeoutMs = 30_000): Promise<Frame> {
    return await poll(
      async () => {
        for (const frame of this.page.frames()) {
          const content = frame.locator('#content');
          if ((await content.count().catch(() => 0)) > 0 && (await content.innerText().catch(() => '')).includes(text))
            return frame;
        }
        return undefined;
      },
      { timeoutMs, description: `a webview showing "${text}"` },
    );
  }

  /** Finds the frame (for example a webview's nested iframe) in which selector matches an element. */
  async frameWith(selector: string, timeoutMs = 30_000): Promise<Frame> {
    return await poll(
      async () => {
        for (const frame of this.page.frames()) {
          if (
            (await frame
              .locator(selector)
              .count()
              .catch(() => 0)) > 0
          ) {
            return frame;
          }
        }
        return undefined;
      },
      { timeoutMs, description: `a frame containing ${selector}` },
    );
  }

  /** Reads the browser clipboard, which is where vscode.env.clipboard writes in code-server. */
  async readClipboard(): Promise<string> {
    await this.page.bringToFront();
    return (await this.page.evaluate('navigator.clipboard.readText()')) as string;
  }

  /** Writes the browser clipboard, e.g. to clear it before a copy command. */
  async writeClipboard(text: string): Promise<void> {
    await this.page.bringToFront();
    await this.page.evaluate(`navigator.clipboard.writeText(${JSON.stringify(text)})`);
  }
}

/** The quick input took a step: it was hidden since (closed, perhaps opened again), or shows another step. */
function movedOn(before: QuickInputState, now: QuickInputState): boolean {
  return now.hides > before.hides || !now.visible || now.identity !== before.identity;
}

/** How many animations (a highlight fading in or out) run on the page's sashes, evaluated in the page. */
const SASH_ANIMATIONS = `document.getAnimations().filter((a) => a.effect && a.effect.target && a.effect.target.classList && a.effect.target.classList.contains('monaco-sash')).length`;
