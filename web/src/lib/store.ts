// A minimal observable value and its Preact hook: the app's shared state (the session, the live
// connection's status) without a state library.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export interface Store<T> {
  get(): T;
  set(value: T): void;
  subscribe(listener: (value: T) => void): () => void;
}

export function createStore<T>(initial: T): Store<T> {
  let value = initial;
  const listeners = new Set<(value: T) => void>();
  return {
    get: () => value,
    set(next) {
      if (Object.is(next, value)) return;
      value = next;
      for (const l of [...listeners]) l(value);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** The store's current value; the component re-renders when it changes. */
export function useStore<T>(store: Store<T>): T {
  const [value, setValue] = useState(store.get());
  useEffect(() => {
    setValue(store.get());
    return store.subscribe(setValue);
  }, [store]);
  return value;
}

/**
 * Collects values pushed at any rate and hands them to `flush` at most every `ms` (live events
 * arrive at about 1 Hz per node or task: a page re-renders once per batch, not per event).
 */
export function useBatch<T>(flush: (items: T[]) => void, ms: number): (item: T) => void {
  const state = useRef<{ items: T[]; timer: number | undefined; flush: typeof flush }>({ items: [], timer: undefined, flush });
  state.current.flush = flush;
  useEffect(() => () => window.clearTimeout(state.current.timer), []);
  return useCallback((item: T) => {
    const s = state.current;
    s.items.push(item);
    if (s.timer === undefined) {
      s.timer = window.setTimeout(() => {
        const items = s.items;
        s.items = [];
        s.timer = undefined;
        s.flush(items);
      }, ms);
    }
  }, [ms]);
}
