// The task page's log view: the last lines of stdout (or stderr), then new bytes as they come —
// stdout from the live stream's `log` events (a gap, e.g. after a reconnect, is filled with GET
// …/logs), stderr by the API's long-poll. Follow keeps the newest line in view (scrolling up
// turns it off), search filters the lines, download saves the whole stream.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { call } from "../../api/client";
import { useLive } from "../../api/live";
import { ErrorBox } from "../../components/ui";
import { saveBlob } from "../../lib/files";

type Stream = "stdout" | "stderr";
const kTailLines = 1000;
const kMaxChars = 2_000_000;
const kMaxShownLines = 5000;

function bytesOf(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function LogView({ task, live }: { task: string; live: boolean }) {
  const [stream, setStream] = useState<Stream>("stdout");
  const [text, setText] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [follow, setFollow] = useState(true);
  const [search, setSearch] = useState("");
  const [truncated, setTruncated] = useState(false);
  const [downloading, setDownloading] = useState(false);
  const box = useRef<HTMLPreElement>(null);
  // The byte offset of the stream up to which `text` holds it, and the decoder of split UTF-8.
  const state = useRef({ end: -1, decoder: new TextDecoder(), chain: Promise.resolve(), gen: 0 });

  const append = (bytes: Uint8Array) => {
    const s = state.current.decoder.decode(bytes, { stream: true });
    if (s) setText((old) => (old.length + s.length > kMaxChars ? (old + s).slice(-kMaxChars) : old + s));
  };

  /** Reads the stream from `end` up to what the server has (in order with the events). */
  const catchUp = (gen: number, waitMs = 0) =>
    (state.current.chain = state.current.chain.then(async () => {
      for (;;) {
        if (gen !== state.current.gen) return;
        const r = await call("readTaskLogs", { path: { id: task }, query: { stream, offset: state.current.end, wait_ms: waitMs || undefined } });
        if (gen !== state.current.gen) return;
        if (r.next_offset > state.current.end) {
          append(bytesOf(r.data_b64).subarray(Math.max(0, state.current.end - r.offset)));
          state.current.end = r.next_offset;
        }
        setTruncated(r.truncated);
        if (r.next_offset >= r.size || waitMs) return;
      }
    }).catch((e) => {
      if (gen === state.current.gen) setError(e);
    }));

  useEffect(() => {
    const gen = ++state.current.gen;
    state.current.decoder = new TextDecoder();
    state.current.end = -1;
    setText("");
    setError(null);
    state.current.chain = call("readTaskLogs", { path: { id: task }, query: { stream, tail: kTailLines } })
      .then((r) => {
        if (gen !== state.current.gen) return;
        append(bytesOf(r.data_b64));
        state.current.end = r.next_offset;
        setTruncated(r.truncated);
      })
      .catch((e) => {
        if (gen === state.current.gen) setError(e);
      });
    if (stream === "stderr" && live) {
      // No events for stderr: follow it with the API's long-poll.
      let stop = false;
      const poll = async () => {
        while (!stop && gen === state.current.gen) {
          await catchUp(gen, 20_000);
          await state.current.chain;
        }
      };
      poll();
      return () => {
        stop = true;
      };
    }
    return undefined;
  }, [task, stream, live]);

  useLive(
    "log",
    (e) => {
      if (e.task !== task || e.stream !== "stdout" || stream !== "stdout") return;
      const gen = state.current.gen;
      state.current.chain = state.current.chain.then(() => {
        if (gen !== state.current.gen || state.current.end < 0) return;
        const bytes = bytesOf(e.data_b64);
        if (e.offset > state.current.end) return void catchUp(gen);
        const skip = state.current.end - e.offset;
        if (skip >= bytes.length) return;
        append(bytes.subarray(skip));
        state.current.end = e.offset + bytes.length;
      });
    },
    [task, stream],
  );
  useLive("resync", () => void catchUp(state.current.gen), [task, stream]);
  // A task that just ended: its last bytes may have come after the last event.
  useEffect(() => {
    if (!live && state.current.end >= 0) void catchUp(state.current.gen);
  }, [live]);

  const lines = useMemo(() => {
    const all = text.split("\n");
    if (all[all.length - 1] === "") all.pop();
    const needle = search.toLowerCase();
    const shown = needle ? all.filter((l) => l.toLowerCase().includes(needle)) : all;
    return { all: all.length, shown: shown.slice(-kMaxShownLines), matched: shown.length };
  }, [text, search]);

  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);

  const download = async () => {
    setDownloading(true);
    try {
      const parts: Uint8Array<ArrayBuffer>[] = [];
      let offset = 0;
      for (;;) {
        const r = await call("readTaskLogs", { path: { id: task }, query: { stream, offset, max_bytes: 4 * 1024 * 1024 } });
        parts.push(bytesOf(r.data_b64));
        offset = r.next_offset;
        if (offset >= r.size) break;
      }
      saveBlob(new Blob(parts, { type: "text/plain" }), `${task}-${stream}.log`);
    } catch (e) {
      setError(e);
    } finally {
      setDownloading(false);
    }
  };

  return (
    <section class="panel" aria-labelledby="log-title" data-testid="task-log">
      <div class="panel-head">
        <h2 id="log-title">Log</h2>
        <div class="toolbar">
          <label>
            Stream{" "}
            <select value={stream} onChange={(e) => setStream(e.currentTarget.value as Stream)} data-testid="log-stream">
              <option value="stdout">stdout</option>
              <option value="stderr">stderr</option>
            </select>
          </label>
          <label class="chip">
            <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} data-testid="log-follow" /> Follow
          </label>
          <label>
            <span class="visually-hidden">Search the log</span>
            <input type="search" placeholder="Search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} data-testid="log-search" />
          </label>
          <button type="button" class="btn btn-plain" onClick={download} disabled={downloading} data-testid="log-download">
            {downloading ? "Downloading…" : "Download"}
          </button>
        </div>
      </div>
      <ErrorBox error={error} testid="log-error" />
      <pre
        ref={box}
        class="log"
        tabIndex={0}
        aria-label={`${stream} of ${task}`}
        aria-live="off"
        data-testid="log-lines"
        onScroll={(e) => {
          const el = e.currentTarget;
          const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 8;
          if (!atEnd && follow) setFollow(false);
        }}
      >
        {lines.shown.length ? lines.shown.join("\n") : <span class="muted">{search ? "No line matches." : "No output yet."}</span>}
      </pre>
      <div class="muted" data-testid="log-count">
        {search ? `${lines.matched} of ${lines.all} lines match` : `${lines.all} lines`}
        {lines.matched > kMaxShownLines && ` (showing the last ${kMaxShownLines})`}
        {truncated && " · the server kept only the first 256 MiB of this stream"}
      </div>
    </section>
  );
}
