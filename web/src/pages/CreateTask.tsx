// The create-task form: every option of `gpupool submit` (name, project, image and/or command,
// whole GPUs / a share with GPU memory / a MIG profile, GPU models from the pool's models, CPU,
// memory, disk, max runtime, stop condition with live syntax checking, idle stop, priority,
// restartable, hold, nodes of a distributed job, volumes mounted below /root, datasets mounted
// read-only there) plus an array count (N copies) and
// input files picked in the browser. Values are parsed with the CLI's rules and messages; a 400 from the server is shown
// beside the field it names. With inputs the task is submitted held, its files uploaded, then
// released (as `gpupool submit --input` does), and the page goes to the new task, which shows
// why it is pending at once.
import { useMemo, useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api/client";
import { session } from "../api/session";
import type { Dataset, TaskSubmit } from "../api/types.gen";
import { ErrorBox, Field, useAsync } from "../components/ui";
import { formatBytes } from "../lib/format";
import { parseDuration, parseGib, parseInteger, parseMib, parseMilli, type Parsed } from "../lib/parse";
import { splitCommand } from "../lib/shell";
import { checkStopCondition, parseStopCondition } from "../lib/stop_condition";
import { checkDatasetMounts, datasetAt, kMaxDatasetMounts, latestVersion, type DatasetDraft } from "../lib/datasets";
import { useStore } from "../lib/store";
import { planUploads, uploadFile, type PlannedUpload } from "../lib/upload";
import { checkMounts, kMaxVolumeMounts, kTaskHome, type MountDraft } from "../lib/volumes";
import { Link, navigate } from "../router";

type GpuForm = "none" | "whole" | "share" | "mig";

interface FormState {
  name: string;
  project: string;
  image: string;
  command: string;
  gpuForm: GpuForm;
  gpus: string;
  share: string;
  gpuMem: string;
  mig: string;
  models: string[];
  cpu: string;
  mem: string;
  disk: string;
  maxRuntime: string;
  stopWhen: string;
  stopIdle: string;
  priority: string;
  restartable: boolean;
  hold: boolean;
  nodes: string;
  count: string;
  mounts: MountDraft[];
  datasets: DatasetDraft[];
}

const kInitial: FormState = {
  name: "",
  project: "",
  image: "",
  command: "",
  gpuForm: "none",
  gpus: "1",
  share: "500",
  gpuMem: "",
  mig: "",
  models: [],
  cpu: "",
  mem: "",
  disk: "",
  maxRuntime: "",
  stopWhen: "",
  stopIdle: "",
  priority: "",
  restartable: false,
  hold: false,
  nodes: "",
  count: "1",
  mounts: [],
  datasets: [],
};

/** The body's fields, for placing a server error next to its field. */
const kFields = ["name", "project", "image", "command", "gpu_count", "gpu_milli", "gpu_mem_mib", "mig_profile", "gpu_models", "cpu_milli", "memory_mib", "disk_gib", "max_runtime_ms", "stop_when", "priority", "nodes", "restartable", "hold", "volumes", "datasets"] as const;
type FieldName = (typeof kFields)[number] | "count" | "inputs";

const kCommonMig = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"];

/** The form → the POST /v1/tasks body, or the errors by field (the CLI's checks and messages). */
function build(f: FormState): { body?: TaskSubmit; nodes?: number; errors: Partial<Record<FieldName, string>> } {
  const errors: Partial<Record<FieldName, string>> = {};
  const body: TaskSubmit = {};
  const take = <T,>(field: FieldName, p: Parsed<T>, set: (v: T) => void) => {
    if (p.error !== undefined) errors[field] = p.error;
    else set(p.value);
  };
  if (f.name) {
    if (f.name.length > 256) errors.name = `name must be 1..256 bytes`;
    body.name = f.name;
  }
  if (f.project) body.project = f.project;
  if (f.image.trim()) body.image = f.image.trim();
  take("command", splitCommand(f.command), (argv) => argv.length && (body.command = argv));
  if (!body.command && !body.image && !errors.command) errors.command = "nothing to run: give a command or an image";
  if (f.gpuForm === "whole") take("gpu_count", parseInteger("GPUs", f.gpus, 1, 8), (v) => (body.gpu_count = v));
  if (f.gpuForm === "share") {
    take("gpu_milli", parseInteger("GPU share (milli-GPU)", f.share, 1, 999), (v) => (body.gpu_milli = v));
    if (f.gpuMem.trim()) take("gpu_mem_mib", parseMib(f.gpuMem), (v) => (body.gpu_mem_mib = v));
  }
  if (f.gpuForm === "mig") {
    if (!f.mig.trim()) errors.mig_profile = "name a MIG profile, like 3g.40gb";
    else body.mig_profile = f.mig.trim();
  }
  if (f.models.length) body.gpu_models = f.models;
  if (f.cpu.trim()) take("cpu_milli", parseMilli(f.cpu), (v) => (body.cpu_milli = v));
  if (f.mem.trim()) take("memory_mib", parseMib(f.mem), (v) => (body.memory_mib = v));
  if (f.disk.trim()) take("disk_gib", parseGib(f.disk), (v) => (body.disk_gib = v));
  if (f.maxRuntime.trim()) {
    take("max_runtime_ms", parseDuration(f.maxRuntime), (v) => {
      if (v <= 0) errors.max_runtime_ms = "max runtime must be longer than 0";
      body.max_runtime_ms = v;
    });
  }
  const condition = f.stopWhen.trim();
  const syntax = checkStopCondition(condition);
  if (syntax) errors.stop_when = syntax;
  let stopWhen = condition;
  if (f.stopIdle.trim()) {
    const idle = parseDuration(f.stopIdle);
    if (idle.error !== undefined) errors.stop_when = `idle stop: ${idle.error}`;
    else if (idle.value < 1000) errors.stop_when = "idle stop must be at least 1s";
    else stopWhen = `${condition ? condition + " || " : ""}idle_s >= ${idle.value / 1000}`;
  }
  if (stopWhen) body.stop_when = stopWhen;
  if (f.priority.trim()) take("priority", parseInteger("priority", f.priority, 0, 1000), (v) => (body.priority = v));
  if (f.restartable) body.restartable = true;
  let nodes: number | undefined;
  if (f.nodes.trim()) {
    take("nodes", parseInteger("nodes", f.nodes, 2, 4096), (v) => (nodes = v));
    if (f.gpuForm === "share") errors.nodes = "a distributed job's members use whole GPUs or a MIG instance, not a share";
    if (f.count.trim() !== "1") errors.nodes = "a distributed job is one submission: leave copies at 1";
  }
  take("count", parseInteger("copies", f.count, 1, 1000), () => {});
  take("volumes", checkMounts(f.mounts), (m) => m.length && (body.volumes = m));
  take("datasets", checkDatasetMounts(f.datasets, body.volumes ?? []), (m) => m.length && (body.datasets = m));
  return { body: Object.keys(errors).length ? undefined : body, nodes, errors };
}

/** The volumes the task mounts: a volume of its project, where (below /root), read-only or not. */
function VolumesField(props: { mounts: MountDraft[]; onChange: (m: MountDraft[]) => void; project: string; error: string | undefined }) {
  const volumes = useAsync((signal) => call("listVolumes", { signal, query: props.project ? { project: props.project } : undefined }).then((r) => r.volumes.filter((v) => v.state === "ready")), [props.project]);
  const names = volumes.data?.map((v) => v.name) ?? [];
  const update = (i: number, change: Partial<MountDraft>) => props.onChange(props.mounts.map((m, j) => (j === i ? { ...m, ...change } : m)));
  const pick = (i: number, name: string) => {
    const m = props.mounts[i];
    // The path follows the volume picked until the user types one of their own.
    const defaulted = m.path === "" || m.path === `${kTaskHome}/${m.volume}`;
    update(i, { volume: name, ...(defaulted ? { path: name ? `${kTaskHome}/${name}` : "" } : {}) });
  };
  const add = () => {
    const free = names.find((n) => !props.mounts.some((m) => m.volume === n)) ?? "";
    props.onChange([...props.mounts, { volume: free, path: free ? `${kTaskHome}/${free}` : "", read_only: false }]);
  };
  return (
    <fieldset>
      <legend>Volumes</legend>
      <p class="muted">
        Your project's data that outlives the task, mounted below <code>{kTaskHome}</code>. A task that mounts a node-local volume runs on its node. <Link href="/volumes">Manage volumes</Link>
      </p>
      <div class={props.error ? "field field-invalid" : "field"} data-testid="create-volumes" data-field="volumes" tabIndex={-1}>
        {props.mounts.length > 0 && (
          <ul class="mounts">
            {props.mounts.map((m, i) => (
              <li key={i} class="mount" data-testid="create-volume-row">
                <select value={m.volume} onChange={(e) => pick(i, e.currentTarget.value)} aria-label={`Volume ${i + 1}`} data-testid="create-volume-select">
                  <option value="">(pick a volume)</option>
                  {[...new Set([...names, ...(m.volume ? [m.volume] : [])])].map((n) => (
                    <option key={n} value={n}>
                      {n}
                    </option>
                  ))}
                </select>
                <input value={m.path} placeholder={`${kTaskHome}/data`} spellcheck={false} onInput={(e) => update(i, { path: e.currentTarget.value })} aria-label={`Mount path of volume ${i + 1}`} data-testid="create-volume-path" />
                <label class="chip">
                  <input type="checkbox" checked={m.read_only} onChange={(e) => update(i, { read_only: e.currentTarget.checked })} data-testid="create-volume-ro" /> Read-only
                </label>
                <button type="button" class="btn btn-plain btn-small" onClick={() => props.onChange(props.mounts.filter((_, j) => j !== i))} data-testid="create-volume-remove">
                  Remove
                </button>
              </li>
            ))}
          </ul>
        )}
        <div class="toolbar">
          <button type="button" class="btn btn-plain" onClick={add} disabled={props.mounts.length >= kMaxVolumeMounts} data-testid="create-volume-add">
            Add a volume
          </button>
          {volumes.data && names.length === 0 && (
            <span class="muted" data-testid="create-volumes-none">
              {props.project ? `Project ${props.project} has no volume yet.` : "No volume yet."} <Link href="/volumes">Create one</Link>
            </span>
          )}
          {!!volumes.error && (
            <span class="action-error" role="alert">
              cannot list the volumes: {messageOf(volumes.error)}
            </span>
          )}
        </div>
        {props.error && (
          <div class="field-error" role="alert" data-testid="create-volumes-error">
            {props.error}
          </div>
        )}
      </div>
    </fieldset>
  );
}

/**
 * The datasets the task mounts read-only: one of its project's (by name) or a published one of
 * another project (by id), a version (or the latest at submission), where (below /root).
 */
function DatasetsField(props: { mounts: DatasetDraft[]; onChange: (m: DatasetDraft[]) => void; project: string; error: string | undefined }) {
  const me = useStore(session)!;
  const datasets = useAsync((signal) => call("listDatasets", { signal, query: props.project ? { project: props.project } : undefined }).then((r) => r.datasets.filter((d) => latestVersion(d))), [props.project]);
  const own = (d: Dataset) => (props.project ? d.project === props.project : me.projects.includes(d.project));
  const choices = new Map((datasets.data ?? []).map((d) => [own(d) ? d.name : d.id, d]));
  const label = (key: string) => {
    const d = choices.get(key);
    return d && !own(d) ? `${d.name} (${d.id}, published by ${d.project})` : key;
  };
  const defaultPath = (key: string) => (key ? `${kTaskHome}/${choices.get(key)?.name ?? key}` : "");
  const update = (i: number, change: Partial<DatasetDraft>) => props.onChange(props.mounts.map((m, j) => (j === i ? { ...m, ...change } : m)));
  const pick = (i: number, key: string) => {
    const m = props.mounts[i];
    // The path follows the dataset picked until the user types one of their own.
    const defaulted = m.path === "" || m.path === defaultPath(m.dataset);
    update(i, { dataset: key, version: 0, ...(defaulted ? { path: defaultPath(key) } : {}) });
  };
  const add = () => {
    const free = [...choices.keys()].find((k) => !props.mounts.some((m) => m.dataset === k)) ?? "";
    props.onChange([...props.mounts, { dataset: free, version: 0, path: defaultPath(free) }]);
  };
  return (
    <fieldset>
      <legend>Datasets</legend>
      <p class="muted">
        Read-only, versioned files pushed with <code>gpupool dataset push</code>, mounted below <code>{kTaskHome}</code>. Without a version the task gets the latest when it is
        submitted. <Link href="/datasets">See the datasets</Link>
      </p>
      <div class={props.error ? "field field-invalid" : "field"} data-testid="create-datasets" data-field="datasets" tabIndex={-1}>
        {props.mounts.length > 0 && (
          <ul class="mounts">
            {props.mounts.map((m, i) => {
              const chosen = choices.get(m.dataset);
              return (
                <li key={i} class="mount" data-testid="create-dataset-row">
                  <select value={m.dataset} onChange={(e) => pick(i, e.currentTarget.value)} aria-label={`Dataset ${i + 1}`} data-testid="create-dataset-select">
                    <option value="">(pick a dataset)</option>
                    {[...new Set([...choices.keys(), ...(m.dataset ? [m.dataset] : [])])].map((k) => (
                      <option key={k} value={k}>
                        {label(k)}
                      </option>
                    ))}
                  </select>
                  <input value={m.path} placeholder={`${kTaskHome}/data`} spellcheck={false} onInput={(e) => update(i, { path: e.currentTarget.value })} aria-label={`Mount path of dataset ${i + 1}`} data-testid="create-dataset-path" />
                  <select value={String(m.version)} onChange={(e) => update(i, { version: Number(e.currentTarget.value) })} aria-label={`Version of dataset ${i + 1}`} data-testid="create-dataset-version">
                    <option value="0">latest{chosen ? ` (v${latestVersion(chosen)?.version})` : ""}</option>
                    {chosen?.versions.map((v) => (
                      <option key={v.version} value={String(v.version)}>
                        {datasetAt(chosen.name, v.version)}
                      </option>
                    ))}
                  </select>
                  <button type="button" class="btn btn-plain btn-small" onClick={() => props.onChange(props.mounts.filter((_, j) => j !== i))} data-testid="create-dataset-remove">
                    Remove
                  </button>
                </li>
              );
            })}
          </ul>
        )}
        <div class="toolbar">
          <button type="button" class="btn btn-plain" onClick={add} disabled={props.mounts.length >= kMaxDatasetMounts} data-testid="create-dataset-add">
            Add a dataset
          </button>
          {datasets.data && choices.size === 0 && (
            <span class="muted" data-testid="create-datasets-none">
              {props.project ? `Project ${props.project} has no pushed dataset yet, and none is published.` : "No pushed dataset yet."}
            </span>
          )}
          {!!datasets.error && (
            <span class="action-error" role="alert">
              cannot list the datasets: {messageOf(datasets.error)}
            </span>
          )}
        </div>
        {props.error && (
          <div class="field-error" role="alert" data-testid="create-datasets-error">
            {props.error}
          </div>
        )}
      </div>
    </fieldset>
  );
}

export function CreateTask() {
  const me = useStore(session)!;
  const [f, setF] = useState<FormState>({ ...kInitial, project: me.projects.length === 1 ? me.projects[0] : "" });
  const [touched, setTouched] = useState<Set<string>>(new Set());
  const [serverErrors, setServerErrors] = useState<Partial<Record<FieldName, string>>>({});
  const [formError, setFormError] = useState<unknown>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [files, setFiles] = useState<PlannedUpload[]>([]);
  const [inputBase, setInputBase] = useState("");
  const [picked, setPicked] = useState<File[]>([]);

  const pool = useAsync(async (signal) => {
    const nodes = (await call("listNodes", { signal })).nodes;
    const models = [...new Set(nodes.flatMap((n) => n.gpus.map((g) => g.model)))].sort();
    const migs = [...new Set(nodes.flatMap((n) => n.gpus.flatMap((g) => g.mig_instances.map((m) => m.profile))))].sort();
    const projects = me.role === "admin" ? (await call("listProjects", { signal })).projects.map((p) => p.id) : me.projects;
    return { models, migs, projects };
  }, []);

  const { body, nodes, errors } = useMemo(() => build(f), [f]);
  const set = <K extends keyof FormState>(k: K, v: FormState[K]) => {
    setF((old) => ({ ...old, [k]: v }));
    setTouched((t) => new Set(t).add(k));
    setServerErrors({});
  };
  const shown = (field: FieldName, from: keyof FormState | Array<keyof FormState>): string | undefined => {
    if (serverErrors[field]) return serverErrors[field];
    const keys = Array.isArray(from) ? from : [from];
    return keys.some((k) => touched.has(k) || touched.has("*")) ? errors[field] : undefined;
  };

  const pick = (list: FileList | null, folder: boolean) => {
    const arr = list ? Array.from(list) : [];
    const all = folder ? arr : [...picked.filter((p) => !(p as File & { webkitRelativePath?: string }).webkitRelativePath), ...arr];
    setPicked(all);
    setFiles(planUploads(all, inputBase));
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setTouched(new Set(["*"]));
    setFormError(null);
    setServerErrors({});
    if (!body) {
      const first = document.querySelector<HTMLElement>(".field-invalid input, .field-invalid textarea, .field-invalid select");
      first?.focus();
      return;
    }
    const copies = Number(f.count) || 1;
    const ids: string[] = [];
    try {
      if (nodes !== undefined) {
        if (files.length) throw new Error("a distributed job's members get no input files of their own: put them in the image or on shared storage");
        setBusy(`Submitting a job of ${nodes} members…`);
        const job = await call("submitJob", { body: { ...body, nodes, ...(f.hold ? { hold: true } : {}) } });
        navigate(`/tasks/${job.members[0].task}`);
        return;
      }
      for (let i = 0; i < copies; i++) {
        const one: TaskSubmit = { ...body };
        if (copies > 1) one.name = `${body.name || "task"}-${i}`;
        if (files.length) one.hold = true;
        else if (f.hold) one.hold = true;
        setBusy(copies > 1 ? `Submitting ${i + 1} of ${copies}…` : "Submitting…");
        const t = await call("submitTask", { body: one });
        ids.push(t.id);
        for (const [n, up] of files.entries()) {
          await uploadFile(t.id, up.path, up.file, (sent, total) =>
            setBusy(`Uploading ${up.path} to ${t.id} (${n + 1}/${files.length}): ${formatBytes(sent)} of ${formatBytes(total)}`),
          );
        }
        if (files.length && !f.hold) {
          setBusy(`Releasing ${t.id}…`);
          await call("releaseTask", { path: { id: t.id } });
        }
      }
      navigate(ids.length === 1 ? `/tasks/${ids[0]}` : `/tasks?q=${encodeURIComponent(body.name ?? "")}`);
    } catch (err) {
      const field = err instanceof ApiError ? err.fieldOf(kFields) : null;
      if (field && ids.length === 0) {
        setServerErrors({ [field]: messageOf(err) });
        document.querySelector<HTMLElement>(`[data-field="${field}"]`)?.focus();
      } else {
        setFormError(ids.length ? new Error(`${messageOf(err)} (submitted so far: ${ids.join(", ")}; a held task stays held until released)`) : err);
      }
    } finally {
      setBusy(null);
    }
  };

  const canonical = f.stopWhen.trim() ? parseStopCondition(f.stopWhen.trim()).canonical : undefined;
  const models = pool.data?.models ?? [];
  const migChoices = [...new Set([...(pool.data?.migs ?? []), ...kCommonMig])];
  return (
    <section class="page" data-testid="page-create-task" aria-labelledby="create-title">
      <h1 id="create-title">Create task</h1>
      <form class="form" onSubmit={submit} novalidate data-testid="create-form">
        <fieldset>
          <legend>What to run</legend>
          <div class="grid2">
            <Field label="Name" error={shown("name", "name")} testid="create-name">
              {({ id, describedBy, invalid }) => <input id={id} data-field="name" value={f.name} onInput={(e) => set("name", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-name" />}
            </Field>
            <Field label="Project" error={shown("project", "project")} testid="create-project" hint={me.projects.length === 1 ? "your only project" : undefined}>
              {({ id, describedBy, invalid }) => (
                <select id={id} data-field="project" value={f.project} onChange={(e) => set("project", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-project">
                  {me.projects.length !== 1 && <option value="">(your only project)</option>}
                  {(pool.data?.projects ?? me.projects).map((p) => (
                    <option key={p} value={p}>
                      {p}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          </div>
          <Field label="Command" error={shown("command", ["command", "image"])} testid="create-command" hint="Words as in a shell: python train.py --lr '1e-4'. No expansion.">
            {({ id, describedBy, invalid }) => <textarea id={id} data-field="command" rows={2} spellcheck={false} value={f.command} onInput={(e) => set("command", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-command" />}
          </Field>
          <Field label="Container image" error={shown("image", "image")} testid="create-image" hint="Without one the command runs as a plain process.">
            {({ id, describedBy, invalid }) => <input id={id} data-field="image" value={f.image} placeholder="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime" spellcheck={false} onInput={(e) => set("image", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-image" />}
          </Field>
        </fieldset>

        <fieldset>
          <legend>GPUs</legend>
          <div class="radios" role="radiogroup" aria-label="GPU request">
            {(
              [
                ["none", "No GPU"],
                ["whole", "Whole GPUs"],
                ["share", "Share of one GPU"],
                ["mig", "MIG instance"],
              ] as Array<[GpuForm, string]>
            ).map(([v, label]) => (
              <label key={v} class="chip">
                <input type="radio" name="gpuForm" value={v} checked={f.gpuForm === v} onChange={() => set("gpuForm", v)} data-testid={`create-gpu-form-${v}`} /> {label}
              </label>
            ))}
          </div>
          {f.gpuForm === "whole" && (
            <Field label="GPUs (1..8, on one node)" error={shown("gpu_count", "gpus")} testid="create-gpus">
              {({ id, describedBy, invalid }) => <input id={id} data-field="gpu_count" inputMode="numeric" value={f.gpus} onInput={(e) => set("gpus", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-gpus" />}
            </Field>
          )}
          {f.gpuForm === "share" && (
            <div class="grid2">
              <Field label="Share (milli-GPU, 1..999)" error={shown("gpu_milli", "share")} testid="create-gpu-share" hint="500: half a GPU">
                {({ id, describedBy, invalid }) => <input id={id} data-field="gpu_milli" inputMode="numeric" value={f.share} onInput={(e) => set("share", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-gpu-share" />}
              </Field>
              <Field label="GPU memory reserved" error={shown("gpu_mem_mib", "gpuMem")} testid="create-gpu-mem" hint="MiB or with a unit: 8Gi">
                {({ id, describedBy, invalid }) => <input id={id} data-field="gpu_mem_mib" value={f.gpuMem} onInput={(e) => set("gpuMem", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-gpu-mem" />}
              </Field>
            </div>
          )}
          {f.gpuForm === "mig" && (
            <Field label="MIG profile" error={shown("mig_profile", "mig")} testid="create-mig">
              {({ id, describedBy, invalid }) => (
                <>
                  <input id={id} data-field="mig_profile" list="mig-profiles" value={f.mig} placeholder="3g.40gb" onInput={(e) => set("mig", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-mig" />
                  <datalist id="mig-profiles">
                    {migChoices.map((m) => (
                      <option key={m} value={m} />
                    ))}
                  </datalist>
                </>
              )}
            </Field>
          )}
          <div class={shown("gpu_models", "models") ? "field field-invalid" : "field"}>
            <span class="label" id="models-label">
              GPU models {models.length === 0 && !pool.loading && <span class="muted">(the pool has no GPU nodes yet)</span>}
            </span>
            <div class="chips" role="group" aria-labelledby="models-label" data-testid="create-gpu-models" data-field="gpu_models" tabIndex={-1}>
              {models.map((m) => (
                <label key={m} class="chip">
                  <input type="checkbox" checked={f.models.includes(m)} onChange={() => set("models", f.models.includes(m) ? f.models.filter((x) => x !== m) : [...f.models, m])} data-testid={`create-gpu-model-${m}`} /> {m}
                </label>
              ))}
            </div>
            <div class="field-hint">None checked: any model.</div>
            {shown("gpu_models", "models") && (
              <div class="field-error" role="alert" data-testid="create-gpu-models-error">
                {shown("gpu_models", "models")}
              </div>
            )}
          </div>
        </fieldset>

        <fieldset>
          <legend>Resources and limits</legend>
          <div class="grid3">
            <Field label="CPU (cores)" error={shown("cpu_milli", "cpu")} testid="create-cpu" hint="2, 0.5">
              {({ id, describedBy, invalid }) => <input id={id} data-field="cpu_milli" inputMode="decimal" value={f.cpu} onInput={(e) => set("cpu", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-cpu" />}
            </Field>
            <Field label="Memory" error={shown("memory_mib", "mem")} testid="create-mem" hint="MiB or 16Gi">
              {({ id, describedBy, invalid }) => <input id={id} data-field="memory_mib" value={f.mem} onInput={(e) => set("mem", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-mem" />}
            </Field>
            <Field label="Scratch disk" error={shown("disk_gib", "disk")} testid="create-disk" hint="GiB or 500M">
              {({ id, describedBy, invalid }) => <input id={id} data-field="disk_gib" value={f.disk} onInput={(e) => set("disk", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-disk" />}
            </Field>
            <Field label="Max runtime" error={shown("max_runtime_ms", "maxRuntime")} testid="create-max-runtime" hint="90s, 15m, 2h, 1h30m, 1d">
              {({ id, describedBy, invalid }) => <input id={id} data-field="max_runtime_ms" value={f.maxRuntime} onInput={(e) => set("maxRuntime", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-max-runtime" />}
            </Field>
            <Field label="Priority (0..1000)" error={shown("priority", "priority")} testid="create-priority" hint="higher may preempt lower">
              {({ id, describedBy, invalid }) => <input id={id} data-field="priority" inputMode="numeric" value={f.priority} onInput={(e) => set("priority", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-priority" />}
            </Field>
            <Field label="Copies (array)" error={shown("count", "count")} testid="create-count" hint="N tasks named NAME-0 … NAME-(N-1)">
              {({ id, describedBy, invalid }) => <input id={id} inputMode="numeric" value={f.count} onInput={(e) => set("count", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-count" />}
            </Field>
          </div>
          <Field
            label="Stop condition"
            error={f.stopWhen ? (serverErrors.stop_when ?? errors.stop_when) : shown("stop_when", ["stopWhen", "stopIdle"])}
            testid="create-stop-when"
            hint={
              canonical ? (
                <>
                  Valid; stored as <code data-testid="create-stop-when-canonical">{canonical}</code>
                </>
              ) : (
                <>
                  On reported metrics and the built-ins gpu_util, gpu_idle_s, idle_s, runtime_s: <code>val_acc &gt; 0.95 &amp;&amp; step &gt;= 1000</code>
                </>
              )
            }
          >
            {({ id, describedBy, invalid }) => <input id={id} data-field="stop_when" value={f.stopWhen} spellcheck={false} onInput={(e) => set("stopWhen", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-stop-when" />}
          </Field>
          <div class="grid3">
            <Field label="Stop when idle for" error={null} testid="create-stop-idle" hint="30m: GPUs and interactive sessions both idle; OR-ed with the condition">
              {({ id, describedBy }) => <input id={id} value={f.stopIdle} onInput={(e) => set("stopIdle", e.currentTarget.value)} aria-describedby={describedBy} data-testid="create-stop-idle" />}
            </Field>
            <Field label="Nodes (distributed job, 2..4096)" error={shown("nodes", "nodes")} testid="create-nodes" hint="members placed together, one per node, with torchrun's MASTER_ADDR, RANK, WORLD_SIZE">
              {({ id, describedBy, invalid }) => <input id={id} data-field="nodes" inputMode="numeric" value={f.nodes} onInput={(e) => set("nodes", e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="create-nodes" />}
            </Field>
          </div>
          <div class="checks">
            <label class="chip">
              <input type="checkbox" checked={f.restartable} onChange={(e) => set("restartable", e.currentTarget.checked)} data-testid="create-restartable" /> Restartable (re-queued when its node is lost or drained)
            </label>
            <label class="chip">
              <input type="checkbox" checked={f.hold} onChange={(e) => set("hold", e.currentTarget.checked)} data-testid="create-hold" /> Hold (not scheduled until released)
            </label>
          </div>
        </fieldset>

        <VolumesField mounts={f.mounts} onChange={(m) => set("mounts", m)} project={f.project} error={shown("volumes", "mounts")} />
        <DatasetsField mounts={f.datasets} onChange={(m) => set("datasets", m)} project={f.project} error={shown("datasets", ["datasets", "mounts"])} />

        <fieldset>
          <legend>Input files</legend>
          <p class="muted">Uploaded into the task's workspace before it can start: the task is submitted held, given its files, then released.</p>
          <div class="grid3">
            <Field label="Files" testid="create-input-files">
              {({ id }) => <input id={id} type="file" multiple onChange={(e) => pick(e.currentTarget.files, false)} data-testid="create-input-files" />}
            </Field>
            <Field label="Or a folder" testid="create-input-folder">
              {({ id }) => <input id={id} type="file" {...{ webkitdirectory: "" }} onChange={(e) => pick(e.currentTarget.files, true)} data-testid="create-input-folder" />}
            </Field>
            <Field label="As task path" testid="create-input-path" hint="default: the file's or folder's name">
              {({ id, describedBy }) => (
                <input
                  id={id}
                  value={inputBase}
                  placeholder="data"
                  onInput={(e) => {
                    setInputBase(e.currentTarget.value);
                    setFiles(planUploads(picked, e.currentTarget.value));
                  }}
                  aria-describedby={describedBy}
                  data-testid="create-input-path"
                />
              )}
            </Field>
          </div>
          {files.length > 0 && (
            <ul class="file-plan" data-testid="create-input-list">
              {files.map((p) => (
                <li key={p.path}>
                  <code>{p.path}</code> <span class="muted">{formatBytes(p.file.size)}</span>
                </li>
              ))}
              <li>
                <button
                  type="button"
                  class="btn btn-plain"
                  onClick={() => {
                    setPicked([]);
                    setFiles([]);
                  }}
                  data-testid="create-input-clear"
                >
                  Clear files
                </button>
              </li>
            </ul>
          )}
        </fieldset>

        <ErrorBox error={formError} testid="create-error" />
        <ErrorBox error={pool.error} testid="create-pool-error" />
        <div class="form-actions">
          <button type="submit" class="btn btn-primary" disabled={!!busy} data-testid="create-submit">
            {busy ?? "Submit"}
          </button>
          <span class="muted" role="status" aria-live="polite" data-testid="create-progress">
            {busy ?? ""}
          </span>
        </div>
      </form>
    </section>
  );
}
