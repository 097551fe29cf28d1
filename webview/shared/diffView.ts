// Diffs as elements, shared by the approval and negotiation panels: line diffs with old and new line numbers, and JSON
// changes (path, kind, short values inline as `before → after`, longer ones as blocks). Text only.
import { formatJsonValue, type DiffLine, type JsonChange } from '../hitl/diffModel';
import { h } from './dom';

export function linesBlock(lines: readonly DiffLine[], label: string): HTMLElement {
  const block = h('div', { class: 'diff-lines', attrs: { role: 'group', 'aria-label': label, tabindex: '0' } });
  for (const line of lines) {
    const number = (n: number | undefined) =>
      h('span', { class: 'ln', attrs: { 'aria-hidden': 'true' } }, n === undefined ? '' : String(n));
    block.append(
      h(
        'div',
        { class: `line ${line.kind}` },
        number(line.oldLine),
        number(line.newLine),
        h('span', { class: 'code' }, line.text || ' '),
      ),
    );
  }
  return block;
}

const CHANGE_MARK: Readonly<Record<JsonChange['kind'], string>> = {
  added: '+',
  removed: '−',
  changed: '~',
  moved: '↷',
  text: '~',
};

export function jsonChangesList(changes: readonly JsonChange[], label: string): HTMLElement {
  const list = h('ul', { class: 'json-changes', attrs: { 'aria-label': label } });
  for (const change of changes) {
    const item = h(
      'li',
      { class: `change ${change.kind}` },
      h('span', { class: 'mark', attrs: { 'aria-hidden': 'true' } }, CHANGE_MARK[change.kind]),
      h('code', { class: 'path' }, change.path),
      ' ',
      h('span', { class: 'kind' }, change.kind),
    );
    if (change.kind === 'moved') item.append(' to ', h('code', {}, change.to ?? '?'));
    const before = change.kind === 'changed' || change.kind === 'removed' ? formatJsonValue(change.before) : undefined;
    const after =
      change.kind === 'changed' || change.kind === 'added' || change.kind === 'text'
        ? formatJsonValue(change.after)
        : undefined;
    const short = (text: string | undefined) => text === undefined || (text.length <= 60 && !text.includes('\n'));
    if (short(before) && short(after)) {
      // Short values on the change's own line: `before → after`.
      if (before !== undefined)
        item.append(': ', h('code', { class: 'value before', attrs: { title: 'before' } }, before));
      if (before !== undefined && after !== undefined) item.append(h('span', { class: 'arrow' }, ' → '));
      else if (after !== undefined) item.append(': ');
      if (after !== undefined) item.append(h('code', { class: 'value after', attrs: { title: 'after' } }, after));
    } else {
      if (before !== undefined)
        item.append(h('div', { class: 'side' }, 'before'), h('pre', { class: 'json before' }, before));
      if (after !== undefined)
        item.append(h('div', { class: 'side' }, 'after'), h('pre', { class: 'json after' }, after));
    }
    list.append(item);
  }
  return list;
}
