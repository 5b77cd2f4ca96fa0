// The console's small shared widgets: a labelled form field with its error beside it, the error
// banner, loading and empty states, a task state badge, key/value lists, and useAsync (a GET
// that a page shows while it loads, with its error, and reloads on demand).
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError, messageOf } from "../api/client";

let fieldIds = 0;

/** A label, the control (given the id and describedby to use) and its hint or error below. */
export function Field(props: {
  label: string;
  error?: string | null;
  hint?: ComponentChildren;
  testid?: string;
  children: (ids: { id: string; describedBy: string | undefined; invalid: boolean }) => ComponentChildren;
}) {
  const id = useRef(`f${++fieldIds}`).current;
  const msgId = `${id}-msg`;
  const hasMsg = !!props.error || !!props.hint;
  return (
    <div class={props.error ? "field field-invalid" : "field"}>
      <label for={id}>{props.label}</label>
      {props.children({ id, describedBy: hasMsg ? msgId : undefined, invalid: !!props.error })}
      {props.error ? (
        <div id={msgId} class="field-error" role="alert" data-testid={props.testid ? `${props.testid}-error` : undefined}>
          {props.error}
        </div>
      ) : props.hint ? (
        <div id={msgId} class="field-hint">
          {props.hint}
        </div>
      ) : null}
    </div>
  );
}

/** An error that belongs to a whole region (not one field). */
export function ErrorBox({ error, testid }: { error: unknown; testid?: string }) {
  if (!error) return null;
  const code = error instanceof ApiError ? error.code : null;
  return (
    <div class="error-box" role="alert" data-testid={testid ?? "error"}>
      {code && <span class="error-code">{code}</span>} {messageOf(error)}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <div class="loading" role="status" aria-live="polite" data-testid="loading">
      Loading {what}…
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return (
    <div class="empty" data-testid="empty">
      {children}
    </div>
  );
}

export function StateBadge({ state, held, testid }: { state: string; held?: boolean; testid?: string }) {
  return (
    <span class={`state state-${state}`} data-testid={testid} data-state={state}>
      {held ? "held" : state}
    </span>
  );
}

/** A definition list of label → value rows (empty values shown as "-"). */
export function Facts({ rows, testid }: { rows: Array<[string, ComponentChildren]>; testid?: string }) {
  return (
    <dl class="facts" data-testid={testid}>
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v === "" || v === null || v === undefined ? "-" : v}</dd>
        </div>
      ))}
    </dl>
  );
}

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
  set: (update: (old: T | undefined) => T | undefined) => void;
}

/** Runs `load` now and whenever `deps` change or reload() is called; keeps the last data. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Async<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    setLoading(true);
    load(ac.signal).then(
      (d) => {
        if (ac.signal.aborted) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e) => {
        if (ac.signal.aborted) return;
        setError(e);
        setLoading(false);
      },
    );
    return () => ac.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload, set: setData };
}

/** A clock that ticks every `ms` (for ages and running costs). */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(t);
  }, [ms]);
  return now;
}

/** A button that runs an async action, disabled while it runs, its error shown beside it. */
export function ActionButton(props: {
  label: string;
  run: () => Promise<unknown>;
  testid: string;
  kind?: "primary" | "danger" | "plain";
  disabled?: boolean;
  confirm?: string;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const onClick = async () => {
    if (props.confirm && !window.confirm(props.confirm)) return;
    setBusy(true);
    setError(null);
    try {
      await props.run();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button type="button" class={`btn btn-${props.kind ?? "plain"}`} onClick={onClick} disabled={busy || props.disabled} data-testid={props.testid} aria-busy={busy}>
        {props.label}
      </button>
      {!!error && (
        <span class="action-error" role="alert" data-testid={`${props.testid}-error`}>
          {messageOf(error)}
        </span>
      )}
    </span>
  );
}
