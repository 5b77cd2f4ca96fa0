// Billing: a project's balance, its ledger (paged), a statement for a period with the cost of
// each task, and for admins the price table (set a price) and credits (grant one). Money is
// integer micros on the wire, shown with six decimals like the CLI.
import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api/client";
import { session } from "../api/session";
import { ActionButton, Empty, ErrorBox, Facts, Field, Loading, useAsync } from "../components/ui";
import { formatMoney, formatTime } from "../lib/format";
import { parseMoney } from "../lib/parse";
import { useStore } from "../lib/store";
import { Link } from "../router";

const kPage = 100;

function utcDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
function startOfMonth(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

function Ledger({ project }: { project: string }) {
  const [offset, setOffset] = useState(0);
  const page = useAsync((signal) => call("getLedger", { path: { id: project }, query: { offset, limit: kPage }, signal }), [project, offset]);
  return (
    <section class="panel" aria-labelledby="ledger-title" data-testid="billing-ledger">
      <h2 id="ledger-title">Ledger</h2>
      <ErrorBox error={page.error} />
      {!page.data ? (
        <Loading what="the ledger" />
      ) : page.data.entries.length === 0 ? (
        <Empty>No entries.</Empty>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Kind</th>
              <th scope="col">Task</th>
              <th scope="col">Period</th>
              <th scope="col" class="num">Amount</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {page.data.entries.map((e) => (
              <tr key={e.key} data-testid="ledger-row">
                <td>{formatTime(e.created_ms)}</td>
                <td>{e.kind}</td>
                <td>{e.task ? <Link href={`/tasks/${e.task}`}>{e.task}</Link> : "-"}</td>
                <td>{e.from_ms ? `${formatTime(e.from_ms)} – ${formatTime(e.to_ms)}` : "-"}</td>
                <td class="num">{formatMoney(e.amount_micros)}</td>
                <td>{e.detail}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="toolbar">
        <button type="button" class="btn btn-plain" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - kPage))} data-testid="ledger-prev">
          Previous page
        </button>
        <button type="button" class="btn btn-plain" disabled={page.data?.next_offset == null} onClick={() => setOffset(page.data!.next_offset!)} data-testid="ledger-next">
          Next page
        </button>
      </div>
    </section>
  );
}

function Statement({ project }: { project: string }) {
  const now = Date.now();
  const [from, setFrom] = useState(utcDate(startOfMonth(now)));
  const [to, setTo] = useState(utcDate(now));
  const fromMs = Date.parse(from + "T00:00:00Z");
  const toMs = Date.parse(to + "T00:00:00Z") + 86_400_000;
  const bad = !Number.isFinite(fromMs) || !Number.isFinite(toMs) || toMs <= fromMs ? "the period must end after it starts" : null;
  const st = useAsync((signal) => (bad ? Promise.resolve(null) : call("getStatement", { path: { id: project }, query: { from_ms: fromMs, to_ms: Math.min(toMs, Date.now()) }, signal })), [project, fromMs, toMs]);
  const byTask = [...(st.data?.by_task ?? [])].sort((a, b) => b.usage_micros - a.usage_micros);
  return (
    <section class="panel" aria-labelledby="statement-title" data-testid="billing-statement">
      <h2 id="statement-title">Statement</h2>
      <div class="grid3">
        <Field label="From (UTC)" testid="statement-from">
          {({ id }) => <input id={id} type="date" value={from} onChange={(e) => setFrom(e.currentTarget.value)} data-testid="statement-from" />}
        </Field>
        <Field label="To (UTC, inclusive)" error={bad} testid="statement-to">
          {({ id, describedBy, invalid }) => <input id={id} type="date" value={to} onChange={(e) => setTo(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="statement-to" />}
        </Field>
      </div>
      <ErrorBox error={st.error} />
      {st.data && (
        <>
          <Facts
            testid="statement-totals"
            rows={[
              ["Credits", formatMoney(st.data.credits_micros)],
              ["Usage", <span data-testid="statement-usage">{formatMoney(st.data.usage_micros)}</span>],
            ]}
          />
          {byTask.length === 0 ? (
            <Empty>No usage in this period.</Empty>
          ) : (
            <table class="table" data-testid="statement-by-task">
              <thead>
                <tr>
                  <th scope="col">Task</th>
                  <th scope="col" class="num">Cost</th>
                </tr>
              </thead>
              <tbody>
                {byTask.map((r) => (
                  <tr key={r.task}>
                    <td>
                      <Link href={`/tasks/${r.task}`}>{r.task}</Link>
                    </td>
                    <td class="num">{formatMoney(r.usage_micros)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}

function Credit({ project, onDone }: { project: string; onDone: () => void }) {
  const [amount, setAmount] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [formError, setFormError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setFormError(null);
    const m = parseMoney(amount);
    if (m.error !== undefined) return setError(m.error);
    if (m.value < 1) return setError("the amount must be positive");
    setError(null);
    try {
      await call("addCredit", { path: { id: project }, body: { amount_micros: m.value, note: note || undefined } });
      setAmount("");
      setNote("");
      onDone();
    } catch (err) {
      if (err instanceof ApiError && err.fieldOf(["amount_micros"])) setError(messageOf(err));
      else setFormError(err);
    }
  };
  return (
    <form class="panel" onSubmit={submit} aria-labelledby="credit-title" data-testid="billing-credit">
      <h2 id="credit-title">Add credit to {project}</h2>
      <div class="grid3">
        <Field label="Amount" error={error} hint="e.g. 100 or 12.5" testid="credit-amount">
          {({ id, describedBy, invalid }) => <input id={id} value={amount} inputMode="decimal" onInput={(e) => setAmount(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="credit-amount" />}
        </Field>
        <Field label="Note" testid="credit-note">
          {({ id }) => <input id={id} value={note} onInput={(e) => setNote(e.currentTarget.value)} data-testid="credit-note" />}
        </Field>
        <div class="field">
          <span class="label">&nbsp;</span>
          <button type="submit" class="btn btn-primary" data-testid="credit-submit">
            Add credit
          </button>
        </div>
      </div>
      <ErrorBox error={formError} />
    </form>
  );
}

function Prices({ admin }: { admin: boolean }) {
  const prices = useAsync((signal) => call("listPrices", { signal }).then((r) => r.prices), []);
  const [resource, setResource] = useState("");
  const [price, setPrice] = useState("");
  const [errors, setErrors] = useState<{ resource?: string; price?: string }>({});
  const [formError, setFormError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setFormError(null);
    const p = parseMoney(price.replace(/\s*\/\s*h(our)?\s*$/, ""));
    const errs: { resource?: string; price?: string } = {};
    if (!resource.trim()) errs.resource = "name a resource: cpu, memory, gpu:<model> or gpu:*";
    if (p.error !== undefined) errs.price = `invalid price '${price}': use an amount per hour with at most six decimals, like 2.5/h`;
    setErrors(errs);
    if (Object.keys(errs).length) return;
    try {
      await call("setPrice", { body: { resource: resource.trim(), micros_per_hour: p.value! } });
      prices.reload();
    } catch (err) {
      const field = err instanceof ApiError ? err.fieldOf(["resource", "micros_per_hour"]) : null;
      if (field === "resource") setErrors({ resource: messageOf(err) });
      else if (field) setErrors({ price: messageOf(err) });
      else setFormError(err);
    }
  };
  return (
    <section class="panel" aria-labelledby="prices-title" data-testid="billing-prices">
      <h2 id="prices-title">Prices</h2>
      <ErrorBox error={prices.error} />
      {!prices.data ? (
        <Loading what="prices" />
      ) : prices.data.length === 0 ? (
        <Empty>No prices set: everything is free.</Empty>
      ) : (
        <table class="table" data-testid="prices-table">
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col" class="num">Per hour</th>
              <th scope="col">Effective</th>
            </tr>
          </thead>
          <tbody>
            {prices.data.map((p) => (
              <tr key={p.resource + p.effective_ms} data-testid="price-row">
                <td>{p.resource}</td>
                <td class="num">{formatMoney(p.micros_per_hour)}</td>
                <td>{formatTime(p.effective_ms)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {admin && (
        <form class="grid3" onSubmit={submit} data-testid="price-form">
          <Field label="Resource" error={errors.resource} hint="cpu (per core), memory (per GiB), gpu:A100-80GB, gpu:*" testid="price-resource">
            {({ id, describedBy, invalid }) => <input id={id} value={resource} onInput={(e) => setResource(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="price-resource" />}
          </Field>
          <Field label="Price per hour" error={errors.price} hint="2.5 or 2.5/h" testid="price-amount">
            {({ id, describedBy, invalid }) => <input id={id} value={price} onInput={(e) => setPrice(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="price-amount" />}
          </Field>
          <div class="field">
            <span class="label">&nbsp;</span>
            <button type="submit" class="btn btn-primary" data-testid="price-submit">
              Set price (effective now)
            </button>
          </div>
          <ErrorBox error={formError} />
        </form>
      )}
    </section>
  );
}

export function Billing() {
  const me = useStore(session)!;
  const admin = me.role === "admin";
  const projects = useAsync((signal) => (admin ? call("listProjects", { signal }).then((r) => r.projects.map((p) => p.id)) : Promise.resolve(me.projects)), [admin]);
  const [chosen, setChosen] = useState("");
  const project = chosen || projects.data?.[0] || "";
  const balance = useAsync((signal) => (project ? call("getBalance", { path: { id: project }, signal }) : Promise.resolve(null)), [project]);
  const [tick, setTick] = useState(0);
  return (
    <section class="page" data-testid="page-billing" aria-labelledby="billing-title">
      <div class="page-head">
        <h1 id="billing-title">Billing</h1>
        <label>
          Project{" "}
          <select value={project} onChange={(e) => setChosen(e.currentTarget.value)} data-testid="billing-project">
            {(projects.data ?? []).map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <ActionButton label="Refresh" testid="billing-refresh" run={async () => (balance.reload(), setTick(tick + 1))} />
      </div>
      <ErrorBox error={projects.error ?? balance.error} />
      {projects.data && projects.data.length === 0 && <Empty>You are in no project yet.</Empty>}
      {project && (
        <>
          <div class="cards" data-testid="billing-balance">
            <div class="card">
              <h2>Balance</h2>
              <div class="big" data-testid="balance">
                {balance.data ? formatMoney(balance.data.balance_micros) : "…"}
              </div>
            </div>
            <div class="card">
              <h2>Credits</h2>
              <div class="big">{balance.data ? formatMoney(balance.data.credits_micros) : "…"}</div>
            </div>
            <div class="card">
              <h2>Usage</h2>
              <div class="big">{balance.data ? formatMoney(balance.data.usage_micros) : "…"}</div>
            </div>
          </div>
          {admin && (
            <Credit
              project={project}
              onDone={() => {
                balance.reload();
                setTick(tick + 1);
              }}
            />
          )}
          <Statement key={`s${project}${tick}`} project={project} />
          <Ledger key={`l${project}${tick}`} project={project} />
        </>
      )}
      <Prices admin={admin} />
    </section>
  );
}
