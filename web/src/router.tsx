// The console's history router: the URL's path and query as a store, navigate() with
// pushState, <Link> for in-app anchors (a plain click navigates in place; modified clicks open
// new tabs as usual), and the route table's matcher.
import type { ComponentChildren, JSX } from "preact";
import { createStore, useStore } from "./lib/store";

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

export const location = createStore<Location>(current());

window.addEventListener("popstate", () => location.set(current()));

/** Goes to `to` (a path with an optional query); `replace` keeps the history entry. */
export function navigate(to: string, replace = false): void {
  if (to === window.location.pathname + window.location.search) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  location.set(current());
  window.scrollTo(0, 0);
}

export function useLocation(): Location {
  return useStore(location);
}

/** The parameters of `pattern` ("/tasks/:id") in `path`, or null when it does not match. */
export function matchRoute(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/");
  const s = path.replace(/\/+$/, "").split("/");
  if (path === "/") s.length = 1;
  if (pattern === "/") return path === "/" ? {} : null;
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) params[p[i].slice(1)] = decodeURIComponent(s[i]);
    else if (p[i] !== s[i]) return null;
  }
  return params;
}

type AnchorProps = JSX.HTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren };

export function Link({ href, children, ...rest }: AnchorProps) {
  const onClick = (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
