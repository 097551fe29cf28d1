// Element helpers shared by the webview screens. Everything is inserted as text: a string child becomes a text node,
// never HTML.

export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { class?: string; id?: string; attrs?: Record<string, string> } = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (props.class) element.className = props.class;
  if (props.id) element.id = props.id;
  for (const [name, value] of Object.entries(props.attrs ?? {})) element.setAttribute(name, value);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return element;
}

export function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the panel has no #${id}`);
  return element as T;
}

export function section(title: string, id: string, ...children: Child[]): HTMLElement {
  return h(
    'section',
    { class: 'section', attrs: { 'aria-labelledby': `${id}-title` } },
    h('h2', { id: `${id}-title` }, title),
    ...children,
  );
}
