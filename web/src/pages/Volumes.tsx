// The volumes of the user's projects (docs/volumes.md): data that outlives tasks, node-local (on
// the node of the first task that mounts it) or on the shared storage. The list (size, kind,
// where, state, the tasks that mount it), a form to create one, resizing in place, and deletion
// (asked first; the server's refusal — tasks still mount it — shown beside the button). Tasks
// mount volumes from the create-task form.
import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api/client";
import { useLive } from "../api/live";
import { session } from "../api/session";
import type { Volume } from "../api/types.gen";
import { ActionButton, Empty, ErrorBox, Field, Loading, useAsync } from "../components/ui";
import { formatBytes, formatTime } from "../lib/format";
import { useBatch, useStore } from "../lib/store";
import { checkVolumeName, kVolumeUnits, parseVolumeSize, volumeSizeField, volumeWhere, type VolumeUnit } from "../lib/volumes";
import { Link } from "../router";

const kUnits = Object.keys(kVolumeUnits) as VolumeUnit[];

function UnitSelect({ value, onChange, testid, label }: { value: VolumeUnit; onChange: (u: VolumeUnit) => void; testid: string; label?: string }) {
  return (
    <select value={value} onChange={(e) => onChange(e.currentTarget.value as VolumeUnit)} aria-label={label ?? "Unit"} data-testid={testid}>
      {kUnits.map((u) => (
        <option key={u} value={u}>
          {u}
        </option>
      ))}
    </select>
  );
}

type CreateField = "name" | "size_bytes" | "project";

function CreateForm({ projects, onCreated }: { projects: string[]; onCreated: (v: Volume) => void }) {
  const [name, setName] = useState("");
  const [size, setSize] = useState("");
  const [unit, setUnit] = useState<VolumeUnit>("GiB");
  const [shared, setShared] = useState(false);
  const [project, setProject] = useState("");
  const [errors, setErrors] = useState<Partial<Record<CreateField, string>>>({});
  const [formError, setFormError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const chosen = project || projects[0] || "";
  const submit = async (e: Event) => {
    e.preventDefault();
    setFormError(null);
    const errs: Partial<Record<CreateField, string>> = {};
    const nameError = checkVolumeName(name.trim());
    if (nameError) errs.name = nameError;
    const bytes = parseVolumeSize(size, unit);
    if (bytes.error !== undefined) errs.size_bytes = bytes.error;
    setErrors(errs);
    if (Object.keys(errs).length) return;
    setBusy(true);
    try {
      const v = await call("createVolume", { body: { name: name.trim(), size_bytes: bytes.value!, shared, ...(projects.length > 1 ? { project: chosen } : {}) } });
      setName("");
      setSize("");
      setShared(false);
      onCreated(v);
    } catch (err) {
      const field = err instanceof ApiError ? err.fieldOf(["name", "size_bytes", "project"]) : null;
      if (field) setErrors({ [field]: messageOf(err) });
      else setFormError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="panel form" onSubmit={submit} novalidate data-testid="volume-form" aria-labelledby="volume-new-title">
      <h2 id="volume-new-title">Create a volume</h2>
      <div class="grid3">
        <Field label="Name" error={errors.name} testid="volume-new-name" hint="a-z 0-9 _ . -, unique in the project">
          {({ id, describedBy, invalid }) => <input id={id} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} spellcheck={false} data-testid="volume-new-name" />}
        </Field>
        <Field label="Size" error={errors.size_bytes} testid="volume-new-size" hint="counted against the project's storage quota">
          {({ id, describedBy, invalid }) => (
            <span class="input-unit">
              <input id={id} inputMode="decimal" value={size} placeholder="200" onInput={(e) => setSize(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="volume-new-size" />
              <UnitSelect value={unit} onChange={setUnit} testid="volume-new-unit" label="Size unit" />
            </span>
          )}
        </Field>
        {projects.length > 1 && (
          <Field label="Project" error={errors.project} testid="volume-new-project">
            {({ id, describedBy, invalid }) => (
              <select id={id} value={chosen} onChange={(e) => setProject(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="volume-new-project">
                {projects.map((p) => (
                  <option key={p} value={p}>
                    {p}
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
      </div>
      <div class="checks">
        <label class="chip">
          <input type="checkbox" checked={shared} onChange={(e) => setShared(e.currentTarget.checked)} data-testid="volume-new-shared" /> Shared (on the shared storage, mountable on every node that
          has it; otherwise node-local: on the node of the first task that mounts it)
        </label>
      </div>
      <ErrorBox error={formError} testid="volume-new-error" />
      <button type="submit" class="btn btn-primary" disabled={busy} data-testid="volume-new-submit">
        Create volume
      </button>
    </form>
  );
}

/** The size cell: the size, and a Resize button that opens the size in place. */
function SizeCell({ volume, onResized }: { volume: Volume; onResized: (v: Volume) => void }) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState("");
  const [unit, setUnit] = useState<VolumeUnit>("GiB");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const open = () => {
    const f = volumeSizeField(volume.size_bytes);
    setText(f.text);
    setUnit(f.unit);
    setError(null);
    setEditing(true);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const bytes = parseVolumeSize(text, unit);
    if (bytes.error !== undefined) return setError(bytes.error);
    setBusy(true);
    try {
      onResized(await call("updateVolume", { path: { id: volume.id }, body: { size_bytes: bytes.value } }));
      setEditing(false);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  if (!editing) {
    return (
      <>
        <span data-testid="volume-size">{formatBytes(volume.size_bytes)}</span>{" "}
        {volume.state === "ready" && (
          <button type="button" class="btn btn-plain btn-small" onClick={open} data-testid="volume-resize">
            Resize
          </button>
        )}
      </>
    );
  }
  return (
    <form class="inline-form" onSubmit={save} novalidate data-testid="volume-resize-form">
      <input value={text} inputMode="decimal" size={6} onInput={(e) => setText(e.currentTarget.value)} aria-label={`New size of ${volume.name}`} aria-invalid={!!error} data-testid="volume-resize-size" />
      <UnitSelect value={unit} onChange={setUnit} testid="volume-resize-unit" />
      <button type="submit" class="btn btn-primary btn-small" disabled={busy} data-testid="volume-resize-save">
        Save
      </button>
      <button type="button" class="btn btn-plain btn-small" onClick={() => setEditing(false)} data-testid="volume-resize-cancel">
        Cancel
      </button>
      {error && (
        <span class="action-error" role="alert" data-testid="volume-resize-error">
          {error}
        </span>
      )}
    </form>
  );
}

export function Volumes() {
  const me = useStore(session)!;
  const volumes = useAsync((signal) => call("listVolumes", { signal }).then((r) => r.volumes), []);
  const projects = useAsync((signal) => (me.role === "admin" ? call("listProjects", { signal }).then((r) => r.projects.map((p) => p.id)) : Promise.resolve(me.projects)), [me.role]);
  // The tasks that mount a volume change as tasks start and end: re-read once per burst.
  const reload = useBatch<null>(() => volumes.reload(), 500);
  useLive("task", (t) => !!t.volumes?.length && reload(null), []);
  useLive("resync", () => volumes.reload(), []);
  const replace = (v: Volume) => volumes.set((old) => old?.map((x) => (x.id === v.id ? v : x)));
  const list = volumes.data;
  return (
    <section class="page" data-testid="page-volumes" aria-labelledby="volumes-title">
      <h1 id="volumes-title">Volumes</h1>
      <p class="muted">
        A volume is your project's data that outlives its tasks: tasks mount it below <code>/root</code> (create a task with a volume, or{" "}
        <code>gpupool submit --volume NAME:/root/data</code>). A node-local volume lives on one node's disk — the node of the first task that mounts it — and its tasks then
        run there; a shared one is on the storage every node with <code>--shared-storage</code> has.
      </p>
      <section class="panel" aria-labelledby="volumes-list-title" data-testid="volumes">
        <div class="panel-head">
          <h2 id="volumes-list-title">Your volumes</h2>
          <div class="toolbar">
            <button type="button" class="btn btn-plain" onClick={() => volumes.reload()} data-testid="volumes-refresh">
              Refresh
            </button>
          </div>
        </div>
        <ErrorBox error={volumes.error} testid="volumes-error" />
        {!list ? (
          !volumes.error && <Loading what="volumes" />
        ) : list.length === 0 ? (
          <Empty>No volume yet.</Empty>
        ) : (
          <table class="table" data-testid="volumes-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Project</th>
                <th scope="col">Size</th>
                <th scope="col">Kind</th>
                <th scope="col">Where</th>
                <th scope="col">State</th>
                <th scope="col">Used by</th>
                <th scope="col" class="hide-mid">
                  Created
                </th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((v) => (
                <tr key={v.id} data-testid="volume-row" data-volume={v.id} data-name={v.name} data-state={v.state}>
                  <td>
                    <strong>{v.name}</strong>
                  </td>
                  <td class="nowrap">
                    <code>{v.id}</code>
                  </td>
                  <td>{v.project}</td>
                  <td>
                    <SizeCell volume={v} onResized={replace} />
                  </td>
                  <td class="nowrap" data-testid="volume-kind">{v.shared ? "shared" : "node-local"}</td>
                  <td data-testid="volume-where" class={v.shared || v.node ? undefined : "muted"}>
                    {volumeWhere(v)}
                  </td>
                  <td>
                    <span class={`state state-volume-${v.state}`} data-testid="volume-state" data-state={v.state}>
                      {v.state}
                    </span>
                  </td>
                  <td data-testid="volume-used-by">
                    {v.used_by.length === 0
                      ? "-"
                      : v.used_by.map((t, i) => (
                          <span key={t}>
                            {i > 0 && ", "}
                            <Link href={`/tasks/${t}`}>{t}</Link>
                          </span>
                        ))}
                  </td>
                  <td class="hide-mid nowrap" title={`by ${v.created_by}`}>
                    {formatTime(v.created_ms)}
                  </td>
                  <td>
                    {v.state === "ready" && (
                      <ActionButton
                        label="Delete"
                        kind="danger"
                        testid="volume-delete"
                        confirm={`Delete the volume ${v.name} (${v.id})? Its files are removed for good.`}
                        run={() => call("deleteVolume", { path: { id: v.id } }).then(() => volumes.reload())}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <CreateForm projects={projects.data ?? me.projects} onCreated={(v) => volumes.set((old) => [...(old ?? []), v])} />
    </section>
  );
}
