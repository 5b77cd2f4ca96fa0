// The console's one live connection (contract §3): an EventSource on GET /v1/events that the
// pages share. A page says what it watches (a task's log/usage/metrics, the nodes' usage) with
// useLiveWatch; listeners get each event's decoded JSON. On an error or an `overflow` the stream
// is reopened with exponential backoff (1 s … 30 s), and once it is live again every `resync`
// listener re-reads its state with the normal GETs (events may have been missed meanwhile).
import { useEffect } from "preact/hooks";
import { operations, watchEventsEventNames, type Operations, type WatchEventsEvents } from "./types.gen";
import { urlOf } from "./client";
import { restoreSession } from "./session";
import { createStore } from "../lib/store";

/** The payload of each event type (from the OpenAPI document), and `resync`: re-read now. */
export interface LiveEvents extends WatchEventsEvents {
  resync: Record<string, never>;
}
export type LiveType = keyof LiveEvents;

/** What a page watches besides the caller's tasks (GET /v1/events' query). */
export type Watch = Pick<Operations["watchEvents"]["query"], "task" | "nodes">;

export type LiveStatus = "off" | "connecting" | "live" | "reconnecting";
export const liveStatus = createStore<LiveStatus>("off");

const listeners = new Map<LiveType, Set<(data: never) => void>>();
const watches = new Map<number, Watch>();
let nextWatchId = 1;
let source: EventSource | null = null;
let streaming: Watch = {}; // what the open stream carries
let everLive = false;
let backoffMs = 1000;
let retryTimer: number | undefined;

function emit<T extends LiveType>(type: T, data: LiveEvents[T]): void {
  for (const l of [...(listeners.get(type) ?? [])]) (l as (d: LiveEvents[T]) => void)(data);
}

/** Listens to one event type; returns the function that stops listening. */
export function onLive<T extends LiveType>(type: T, listener: (data: LiveEvents[T]) => void): () => void {
  let set = listeners.get(type);
  if (!set) listeners.set(type, (set = new Set()));
  set.add(listener as (data: never) => void);
  return () => set!.delete(listener as (data: never) => void);
}

/** What the watches ask for together (the last task watched wins: one page watches one). */
function wanted(): Watch {
  let task: string | undefined;
  let nodes = false;
  for (const w of watches.values()) {
    if (w.task) task = w.task;
    if (w.nodes) nodes = true;
  }
  return { task, nodes };
}

/** Whether the open stream lacks something a watch needs (what no watch needs any more stays). */
function lacking(): boolean {
  const w = wanted();
  return (!!w.task && w.task !== streaming.task) || (!!w.nodes && !streaming.nodes);
}

function close(): void {
  source?.close();
  source = null;
  if (retryTimer !== undefined) window.clearTimeout(retryTimer);
  retryTimer = undefined;
}

function scheduleReconnect(): void {
  close();
  liveStatus.set("reconnecting");
  const delay = backoffMs;
  backoffMs = Math.min(backoffMs * 2, 30_000);
  retryTimer = window.setTimeout(() => {
    retryTimer = undefined;
    // An error may be a dead session (EventSource cannot see the status): asking for the
    // session sends a 401 to the login page; otherwise connect again.
    restoreSession()
      .then((s) => s && open())
      .catch(() => scheduleReconnect());
  }, delay);
}

function open(): void {
  close();
  streaming = wanted();
  const url = urlOf(operations.watchEvents.path, undefined, { task: streaming.task, nodes: streaming.nodes ? "true" : undefined });
  liveStatus.set(everLive ? "reconnecting" : "connecting");
  const es = new EventSource(url, { withCredentials: true });
  source = es;
  for (const type of watchEventsEventNames) {
    es.addEventListener(type, (e) => {
      let data: unknown;
      try {
        data = JSON.parse((e as MessageEvent<string>).data);
      } catch {
        return;
      }
      if (type === "overflow") {
        scheduleReconnect();
        return;
      }
      if (type === "hello") {
        backoffMs = 1000;
        liveStatus.set("live");
        if (everLive) emit("resync", {});
        everLive = true;
      }
      emit(type, data as LiveEvents[typeof type]);
    });
  }
  es.onerror = () => {
    if (source === es) scheduleReconnect();
  };
}

/** Starts the connection (after login). */
export function startLive(): void {
  if (!source && retryTimer === undefined) open();
}

/** Ends it (logout). */
export function stopLive(): void {
  close();
  everLive = false;
  liveStatus.set("off");
}

/** While the calling component is mounted, the stream also carries what `watch` names. */
export function useLiveWatch(watch: Watch): void {
  const key = `${watch.task ?? ""}|${watch.nodes ? 1 : 0}`;
  useEffect(() => {
    const id = nextWatchId++;
    watches.set(id, watch);
    // A stream that lacks the new watch is reopened; once the new one is live, `resync` has the
    // pages re-read what changed in between. A watch that ends keeps the stream as it is: its
    // extra events are ignored, and the next page need not wait for a new stream.
    if ((source || retryTimer !== undefined) && lacking()) {
      everLive = true;
      open();
    }
    return () => {
      watches.delete(id);
    };
  }, [key]);
}

/** Calls `listener` for each event of `type` while the component is mounted. */
export function useLive<T extends LiveType>(type: T, listener: (data: LiveEvents[T]) => void, deps: unknown[]): void {
  useEffect(() => onLive(type, listener), deps);
}
