// Nodes (admins): every node with its capacity, what is free, its GPUs and their MIG layout,
// cordon / drain / uncordon, lost nodes highlighted; and the join tokens new nodes join with
// (create — the token is shown once — and revoke). Node changes arrive on the live stream.
import { useState } from "preact/hooks";
import { call, messageOf } from "../api/client";
import { useLive, useLiveWatch } from "../api/live";
import type { NewJoinToken, Node } from "../api/types.gen";
import { ActionButton, Empty, ErrorBox, Field, Loading, useAsync, useNow } from "../components/ui";
import { formatAge, formatMib, formatMilli, formatTime } from "../lib/format";
import { parseDuration } from "../lib/parse";
import { Link } from "../router";

function NodeCard({ n, onChange }: { n: Node; onChange: (n: Node) => void }) {
  const now = useNow(5000);
  const act = (op: "cordonNode" | "uncordonNode" | "drainNode") => () => call(op, { path: { name: n.name } }).then(onChange);
  return (
    <article class={n.status === "lost" ? "panel lost-row" : "panel"} data-testid={`node-${n.name}`} data-status={n.status} data-cordoned={n.cordoned} aria-labelledby={`node-${n.name}-title`}>
      <div class="panel-head">
        <h2 id={`node-${n.name}-title`}>
          {n.name}{" "}
          <span class={n.status === "lost" ? "badge badge-bad" : "badge"} data-testid="node-status">
            {n.status}
          </span>{" "}
          {n.cordoned && <span class="badge">{n.draining ? "draining" : "cordoned"}</span>}
        </h2>
        <div class="toolbar">
          {n.cordoned ? (
            <ActionButton label="Uncordon" testid="node-uncordon" run={act("uncordonNode")} />
          ) : (
            <ActionButton label="Cordon" testid="node-cordon" run={act("cordonNode")} />
          )}
          {!n.draining && <ActionButton label="Drain" kind="danger" testid="node-drain" confirm={`Drain ${n.name}? Its tasks are stopped (restartable ones re-queued).`} run={act("drainNode")} />}
        </div>
      </div>
      <p class="muted">
        CPU {formatMilli(n.cpu_free_milli)} of {formatMilli(n.cpu_milli)} free · memory {formatMib(n.memory_free_mib)} of {formatMib(n.memory_mib)} free · GPU {formatMilli(n.gpus.reduce((sum, g) => sum + g.milli_free, 0))} of {n.gpus.length} free · disk {n.disk_gib} GiB · heartbeat {formatAge(n.last_heartbeat_ms, now)} ago
        {Object.keys(n.labels).length > 0 && ` · ${Object.entries(n.labels).map(([k, v]) => `${k}=${v}`).join(", ")}`}
      </p>
      {n.gpus.length > 0 && (
        <table class="table" data-testid="node-gpus">
          <thead>
            <tr>
              <th scope="col">GPU</th>
              <th scope="col">Model</th>
              <th scope="col">Memory</th>
              <th scope="col">MIG layout</th>
            </tr>
          </thead>
          <tbody>
            {n.gpus.map((g) => (
              <tr key={g.index}>
                <td>{g.index}</td>
                <td title={g.uuid}>{g.model}</td>
                <td>{formatMib(g.mem_mib)}</td>
                <td data-testid="node-gpu-mig">
                  {!g.mig_enabled ? (
                    <span class="muted">off</span>
                  ) : g.mig_instances.length === 0 ? (
                    "enabled, no instances"
                  ) : (
                    g.mig_instances.map((m) => (
                      <span key={m.start} class={m.in_use ? "badge badge-bad" : "badge"}>
                        {m.profile}@{m.start}
                        {m.in_use ? " in use" : ""}
                      </span>
                    ))
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {n.tasks.length > 0 && (
        <p>
          Tasks:{" "}
          {n.tasks.map((t) => (
            <>
              <Link key={t} href={`/tasks/${t}`}>
                {t}
              </Link>{" "}
            </>
          ))}
        </p>
      )}
    </article>
  );
}

function JoinTokens() {
  const tokens = useAsync((signal) => call("listJoinTokens", { signal }).then((r) => r.join_tokens), []);
  const [description, setDescription] = useState("");
  const [expires, setExpires] = useState("");
  const [expiresError, setExpiresError] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<NewJoinToken | null>(null);

  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setExpiresError(null);
    let expires_in_ms: number | undefined;
    if (expires.trim()) {
      const d = parseDuration(expires);
      if (d.error !== undefined) return setExpiresError(d.error);
      expires_in_ms = d.value;
    }
    try {
      setCreated(await call("createJoinToken", { body: { description: description || undefined, expires_in_ms } }));
      setDescription("");
      tokens.reload();
    } catch (err) {
      if (/expires_in_ms/.test(messageOf(err))) setExpiresError(messageOf(err));
      else setError(err);
    }
  };
  return (
    <section class="panel" aria-labelledby="tokens-title" data-testid="join-tokens">
      <h2 id="tokens-title">Join tokens</h2>
      <form class="grid3" onSubmit={create}>
        <Field label="Description" testid="token-description">
          {({ id }) => <input id={id} value={description} onInput={(e) => setDescription(e.currentTarget.value)} data-testid="token-description" />}
        </Field>
        <Field label="Expires after" error={expiresError} hint="e.g. 1d; empty: never" testid="token-expires">
          {({ id, describedBy, invalid }) => <input id={id} value={expires} onInput={(e) => setExpires(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="token-expires" />}
        </Field>
        <div class="field">
          <span class="label">&nbsp;</span>
          <button type="submit" class="btn btn-primary" data-testid="token-create">
            Create join token
          </button>
        </div>
      </form>
      <ErrorBox error={error} />
      {created && (
        <div role="status" data-testid="token-created">
          <p>
            New token <strong>{created.id}</strong>: copy it now, it is not shown again. On the node: <code>gpupool agent --server {window.location.origin} --join-token …</code>
          </p>
          <div class="secret" data-testid="token-secret">
            {created.token}
          </div>
          <button type="button" class="btn btn-plain" onClick={() => navigator.clipboard?.writeText(created.token)}>
            Copy
          </button>{" "}
          <button type="button" class="btn btn-plain" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      <ErrorBox error={tokens.error} />
      {!tokens.data ? (
        <Loading what="join tokens" />
      ) : tokens.data.length === 0 ? (
        <Empty>No join tokens.</Empty>
      ) : (
        <table class="table" data-testid="tokens-table">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Description</th>
              <th scope="col">State</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Nodes</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.data.map((t) => (
              <tr key={t.id} data-testid="token-row" data-token={t.id}>
                <td>
                  <code>{t.id}</code>
                </td>
                <td>{t.description}</td>
                <td>{t.state}</td>
                <td>{formatTime(t.created_ms)}</td>
                <td>{t.expires_ms ? formatTime(t.expires_ms) : "never"}</td>
                <td>{t.nodes.join(", ")}</td>
                <td>{t.state === "active" && <ActionButton label="Revoke" kind="danger" testid="token-revoke" confirm={`Revoke ${t.id}? Nodes that joined with it lose their keys.`} run={() => call("revokeJoinToken", { path: { id: t.id } }).then(tokens.reload)} />}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function Nodes() {
  useLiveWatch({ nodes: true });
  const nodes = useAsync((signal) => call("listNodes", { signal }).then((r) => r.nodes), []);
  const upsert = (n: Node) => nodes.set((old) => (old ? (old.some((x) => x.name === n.name) ? old.map((x) => (x.name === n.name ? n : x)) : [...old, n]) : old));
  useLive("node", upsert, []);
  useLive("resync", () => nodes.reload(), []);
  const list = [...(nodes.data ?? [])].sort((a, b) => (a.status === b.status ? (a.name < b.name ? -1 : 1) : a.status === "lost" ? -1 : 1));
  const lost = list.filter((n) => n.status === "lost").length;
  return (
    <section class="page" data-testid="page-nodes" aria-labelledby="nodes-title">
      <h1 id="nodes-title">Nodes</h1>
      <ErrorBox error={nodes.error} />
      {nodes.data && (
        <p class="muted" data-testid="nodes-summary">
          {list.length} node{list.length === 1 ? "" : "s"}
          {lost > 0 && <strong class="action-error"> · {lost} lost</strong>}
        </p>
      )}
      {!nodes.data ? nodes.loading && <Loading what="nodes" /> : list.length === 0 ? <Empty>No node has joined yet: create a join token below.</Empty> : list.map((n) => <NodeCard key={n.name} n={n} onChange={upsert} />)}
      <JoinTokens />
    </section>
  );
}
