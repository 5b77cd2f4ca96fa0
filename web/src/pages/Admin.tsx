// Administration (admins): projects and their quotas (GPUs held, unfinished tasks, the bytes of
// its tasks' files, the grace a project's tasks get once its balance is gone), users with their role and projects, and each
// user's access keys — a new key's secret is shown once — with revocation.
import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api/client";
import type { NewAccessKey, Project, User } from "../api/types.gen";
import { ActionButton, Empty, ErrorBox, Field, Loading, useAsync } from "../components/ui";
import { formatBytes, formatDuration, formatMib, formatMilli, formatTime } from "../lib/format";
import { parseDuration, parseInteger, parseMib, parseMilli, type Parsed } from "../lib/parse";

/** A quota as typed: empty or "-1" → unlimited (-1); else `parse`. */
function quota(text: string, parse: (t: string) => Parsed<number>): Parsed<number> {
  const t = text.trim();
  if (t === "" || t === "-1" || t === "unlimited") return { value: -1 };
  return parse(t);
}
const showQuota = (v: number, f: (v: number) => string) => (v < 0 ? "unlimited" : f(v));

const MIB = 1024 * 1024;
/** A storage quota as typed ("50G", "512M"; binary units) → bytes. */
function parseStorage(text: string): Parsed<number> {
  const mib = parseMib(text);
  if (mib.error !== undefined) return mib;
  return Number.isSafeInteger(mib.value * MIB) ? { value: mib.value * MIB } : { error: `size '${text}' is too large` };
}
/** Bytes as the form shows them: "50Gi" where a whole number of MiB, else "1.5 KiB". */
const showStorage = (bytes: number) => (bytes % MIB === 0 ? formatMib(bytes / MIB) : formatBytes(bytes));

type Errors = Partial<Record<string, string>>;

/** Places an API error on its field among `fields`, else returns it for the form. */
function place(err: unknown, fields: string[], setErrors: (e: Errors) => void): unknown {
  const f = err instanceof ApiError ? err.fieldOf(fields) : null;
  if (f) {
    setErrors({ [f]: messageOf(err) });
    return null;
  }
  return err;
}

function ProjectForm({ project, onSaved }: { project?: Project; onSaved: () => void }) {
  const [id, setId] = useState(project?.id ?? "");
  const [name, setName] = useState(project?.name ?? "");
  const [gpus, setGpus] = useState(project && project.max_gpu_milli >= 0 ? formatMilli(project.max_gpu_milli) : "");
  const [tasks, setTasks] = useState(project && project.max_tasks >= 0 ? String(project.max_tasks) : "");
  const [storage, setStorage] = useState(project && project.max_storage_bytes >= 0 ? showStorage(project.max_storage_bytes) : "");
  const [grace, setGrace] = useState(project ? formatDuration(project.stop_grace_ms) : "");
  const [errors, setErrors] = useState<Errors>({});
  const [formError, setFormError] = useState<unknown>(null);
  const p = project ? `project-${project.id}` : "project-new";
  const submit = async (e: Event) => {
    e.preventDefault();
    setFormError(null);
    const g = quota(gpus, parseMilli);
    const t = quota(tasks, (x) => parseInteger("max tasks", x, 0, Number.MAX_SAFE_INTEGER));
    const b = quota(storage, parseStorage);
    const s: Parsed<number | undefined> = grace.trim() ? parseDuration(grace) : { value: undefined };
    const errs: Errors = {};
    if (!project && !/^[A-Za-z0-9._-]{1,128}$/.test(id)) errs.id = "id must be 1..128 of A-Z a-z 0-9 - _ .";
    if (g.error !== undefined) errs.max_gpu_milli = g.error;
    if (t.error !== undefined) errs.max_tasks = t.error;
    if (b.error !== undefined) errs.max_storage_bytes = b.error;
    if (s.error !== undefined) errs.stop_grace_ms = s.error;
    setErrors(errs);
    if (Object.keys(errs).length) return;
    try {
      const body = { name: name || undefined, max_gpu_milli: g.value!, max_tasks: t.value!, max_storage_bytes: b.value!, stop_grace_ms: s.value };
      if (project) await call("patchProject", { path: { id: project.id }, body });
      else await call("createProject", { body: { id, ...body } });
      if (!project) setId("");
      onSaved();
    } catch (err) {
      setFormError(place(err, ["id", "name", "max_gpu_milli", "max_tasks", "max_storage_bytes", "stop_grace_ms"], setErrors));
    }
  };
  return (
    <form class="grid3" onSubmit={submit} data-testid={`${p}-form`}>
      {!project && (
        <Field label="Id" error={errors.id} testid="project-id">
          {({ id: fid, describedBy, invalid }) => <input id={fid} value={id} onInput={(e) => setId(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="project-id" />}
        </Field>
      )}
      <Field label="Name" error={errors.name} testid={`${p}-name`}>
        {({ id: fid }) => <input id={fid} value={name} onInput={(e) => setName(e.currentTarget.value)} data-testid={`${p}-name`} />}
      </Field>
      <Field label="Max GPUs held" error={errors.max_gpu_milli} hint="e.g. 8 or 2.5; empty: unlimited" testid={`${p}-max-gpus`}>
        {({ id: fid, describedBy, invalid }) => <input id={fid} value={gpus} onInput={(e) => setGpus(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid={`${p}-max-gpus`} />}
      </Field>
      <Field label="Max unfinished tasks" error={errors.max_tasks} hint="empty: unlimited" testid={`${p}-max-tasks`}>
        {({ id: fid, describedBy, invalid }) => <input id={fid} value={tasks} onInput={(e) => setTasks(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid={`${p}-max-tasks`} />}
      </Field>
      <Field label="Max storage" error={errors.max_storage_bytes} hint="its tasks' files, e.g. 50G; empty: unlimited" testid={`${p}-max-storage`}>
        {({ id: fid, describedBy, invalid }) => <input id={fid} value={storage} onInput={(e) => setStorage(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid={`${p}-max-storage`} />}
      </Field>
      <Field label="Stop grace" error={errors.stop_grace_ms} hint="once the balance is gone, e.g. 10m" testid={`${p}-grace`}>
        {({ id: fid, describedBy, invalid }) => <input id={fid} value={grace} onInput={(e) => setGrace(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid={`${p}-grace`} />}
      </Field>
      <div class="field">
        <span class="label">&nbsp;</span>
        <button type="submit" class="btn btn-primary" data-testid={`${p}-submit`}>
          {project ? "Save quotas" : "Create project"}
        </button>
      </div>
      <ErrorBox error={formError} />
    </form>
  );
}

function Projects({ onChange }: { onChange: () => void }) {
  const projects = useAsync((signal) => call("listProjects", { signal }).then((r) => r.projects), []);
  const saved = () => {
    projects.reload();
    onChange();
  };
  const [editing, setEditing] = useState<string | null>(null);
  return (
    <section class="panel" aria-labelledby="projects-title" data-testid="admin-projects">
      <h2 id="projects-title">Projects</h2>
      <ErrorBox error={projects.error} />
      {!projects.data ? (
        <Loading what="projects" />
      ) : projects.data.length === 0 ? (
        <Empty>No projects.</Empty>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Name</th>
              <th scope="col" class="num">Max GPUs</th>
              <th scope="col" class="num">Max tasks</th>
              <th scope="col" class="num">Max storage</th>
              <th scope="col">Stop grace</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {projects.data.map((p) => (
              <>
                <tr key={p.id} data-testid="project-row" data-project={p.id}>
                  <td>{p.id}</td>
                  <td>{p.name}</td>
                  <td class="num">{showQuota(p.max_gpu_milli, formatMilli)}</td>
                  <td class="num">{showQuota(p.max_tasks, String)}</td>
                  <td class="num" data-testid="project-max-storage">{showQuota(p.max_storage_bytes, showStorage)}</td>
                  <td>{formatDuration(p.stop_grace_ms)}</td>
                  <td>{formatTime(p.created_ms)}</td>
                  <td>
                    <button type="button" class="btn btn-plain" aria-expanded={editing === p.id} onClick={() => setEditing(editing === p.id ? null : p.id)} data-testid="project-edit">
                      {editing === p.id ? "Close" : "Edit quotas"}
                    </button>
                  </td>
                </tr>
                {editing === p.id && (
                  <tr key={`${p.id}-edit`}>
                    <td colSpan={8}>
                      <ProjectForm project={p} onSaved={() => (setEditing(null), saved())} />
                    </td>
                  </tr>
                )}
              </>
            ))}
          </tbody>
        </table>
      )}
      <h3>New project</h3>
      <ProjectForm onSaved={saved} />
    </section>
  );
}

function Keys({ user }: { user: User }) {
  const keys = useAsync((signal) => call("listKeys", { path: { id: user.id }, signal }).then((r) => r.keys), [user.id]);
  const [description, setDescription] = useState("");
  const [created, setCreated] = useState<NewAccessKey | null>(null);
  return (
    <div data-testid={`keys-${user.id}`}>
      <ErrorBox error={keys.error} />
      {created && (
        <div role="status" data-testid="key-created">
          <p>
            New key for {created.user}: copy the secret now, it is not shown again.
          </p>
          <div class="secret">
            access key <span data-testid="key-access">{created.access_key}</span>
            <br />
            secret key <span data-testid="key-secret">{created.secret_key}</span>
          </div>
          <button type="button" class="btn btn-plain" onClick={() => setCreated(null)} data-testid="key-created-done">
            Done
          </button>
        </div>
      )}
      {!keys.data ? (
        <Loading what="keys" />
      ) : keys.data.length === 0 ? (
        <Empty>No keys.</Empty>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Access key</th>
              <th scope="col">Description</th>
              <th scope="col">Created</th>
              <th scope="col">State</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.map((k) => (
              <tr key={k.access_key} data-testid="key-row" data-key={k.access_key}>
                <td>
                  <code>{k.access_key}</code>
                </td>
                <td>{k.description}</td>
                <td>{formatTime(k.created_ms)}</td>
                <td>{k.active ? "active" : `revoked ${formatTime(k.revoked_ms)}`}</td>
                <td>{k.active && <ActionButton label="Revoke" kind="danger" testid="key-revoke" confirm={`Revoke ${k.access_key}? Its sessions end at once.`} run={() => call("revokeKey", { path: { access_key: k.access_key } }).then(keys.reload)} />}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="toolbar">
        <label>
          <span class="visually-hidden">Description of the new key</span>
          <input placeholder="description (laptop)" value={description} onInput={(e) => setDescription(e.currentTarget.value)} data-testid="key-description" />
        </label>
        <ActionButton
          label="Create key"
          kind="primary"
          testid="key-create"
          run={async () => {
            setCreated(await call("createKey", { path: { id: user.id }, body: { description: description || undefined } }));
            setDescription("");
            keys.reload();
          }}
        />
      </div>
    </div>
  );
}

function UserRow({ u, projects, onSaved }: { u: User; projects: string[]; onSaved: () => void }) {
  const [open, setOpen] = useState(false);
  const [role, setRole] = useState(u.role);
  const [member, setMember] = useState<string[]>(u.projects);
  return (
    <>
      <tr data-testid="user-row" data-user={u.id}>
        <td>{u.id}</td>
        <td>{u.name}</td>
        <td>{u.role}</td>
        <td>{u.projects.join(", ") || "-"}</td>
        <td>
          <button type="button" class="btn btn-plain" aria-expanded={open} onClick={() => setOpen(!open)} data-testid="user-open">
            {open ? "Close" : "Role, projects, keys"}
          </button>
        </td>
      </tr>
      {open && (
        <tr>
          <td colSpan={5}>
            <div class="toolbar">
              <label>
                Role{" "}
                <select value={role} onChange={(e) => setRole(e.currentTarget.value as User["role"])} data-testid="user-role">
                  <option value="member">member</option>
                  <option value="admin">admin</option>
                </select>
              </label>
              <span class="chips" role="group" aria-label="Projects">
                {projects.map((p) => (
                  <label key={p} class="chip">
                    <input type="checkbox" checked={member.includes(p)} onChange={() => setMember(member.includes(p) ? member.filter((x) => x !== p) : [...member, p])} data-testid={`user-project-${p}`} /> {p}
                  </label>
                ))}
              </span>
              <ActionButton label="Save" kind="primary" testid="user-save" run={() => call("patchUser", { path: { id: u.id }, body: { role, projects: member } }).then(onSaved)} />
            </div>
            <h3>Keys</h3>
            <Keys user={u} />
          </td>
        </tr>
      )}
    </>
  );
}

/** `projectsVersion` changes when a project was created: its checkbox must appear. */
function Users({ projectsVersion }: { projectsVersion: number }) {
  const users = useAsync((signal) => call("listUsers", { signal }).then((r) => r.users), []);
  const projects = useAsync((signal) => call("listProjects", { signal }).then((r) => r.projects.map((p) => p.id)), [projectsVersion]);
  const [id, setId] = useState("");
  const [name, setName] = useState("");
  const [role, setRole] = useState<User["role"]>("member");
  const [member, setMember] = useState<string[]>([]);
  const [errors, setErrors] = useState<Errors>({});
  const [formError, setFormError] = useState<unknown>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    setFormError(null);
    setErrors({});
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(id)) return setErrors({ id: "id must be 1..128 of A-Z a-z 0-9 - _ ." });
    try {
      await call("createUser", { body: { id, name: name || undefined, role, projects: member } });
      setId("");
      setName("");
      setMember([]);
      users.reload();
    } catch (err) {
      setFormError(place(err, ["id", "name", "role", "projects"], setErrors));
    }
  };
  return (
    <section class="panel" aria-labelledby="users-title" data-testid="admin-users">
      <h2 id="users-title">Users</h2>
      <ErrorBox error={users.error ?? projects.error} />
      {!users.data ? (
        <Loading what="users" />
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">Projects</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {users.data.map((u) => (
              <UserRow key={u.id} u={u} projects={projects.data ?? []} onSaved={users.reload} />
            ))}
          </tbody>
        </table>
      )}
      <h3>New user</h3>
      <form class="grid3" onSubmit={create} data-testid="user-form">
        <Field label="Id" error={errors.id} testid="user-id">
          {({ id: fid, describedBy, invalid }) => <input id={fid} value={id} onInput={(e) => setId(e.currentTarget.value)} aria-describedby={describedBy} aria-invalid={invalid} data-testid="user-id" />}
        </Field>
        <Field label="Name" error={errors.name} testid="user-name">
          {({ id: fid }) => <input id={fid} value={name} onInput={(e) => setName(e.currentTarget.value)} data-testid="user-name" />}
        </Field>
        <Field label="Role" error={errors.role} testid="user-new-role">
          {({ id: fid }) => (
            <select id={fid} value={role} onChange={(e) => setRole(e.currentTarget.value as User["role"])} data-testid="user-new-role">
              <option value="member">member</option>
              <option value="admin">admin</option>
            </select>
          )}
        </Field>
        <div class={errors.projects ? "field field-invalid" : "field"}>
          <span class="label" id="new-user-projects">
            Projects
          </span>
          <span class="chips" role="group" aria-labelledby="new-user-projects">
            {(projects.data ?? []).map((p) => (
              <label key={p} class="chip">
                <input type="checkbox" checked={member.includes(p)} onChange={() => setMember(member.includes(p) ? member.filter((x) => x !== p) : [...member, p])} data-testid={`user-new-project-${p}`} /> {p}
              </label>
            ))}
          </span>
          {errors.projects && (
            <div class="field-error" role="alert">
              {errors.projects}
            </div>
          )}
        </div>
        <div class="field">
          <span class="label">&nbsp;</span>
          <button type="submit" class="btn btn-primary" data-testid="user-submit">
            Create user
          </button>
        </div>
        <ErrorBox error={formError} />
      </form>
    </section>
  );
}

export function Admin() {
  const [projectsVersion, setProjectsVersion] = useState(0);
  return (
    <section class="page" data-testid="page-admin" aria-labelledby="admin-title">
      <h1 id="admin-title">Admin</h1>
      <Projects onChange={() => setProjectsVersion((v) => v + 1)} />
      <Users projectsVersion={projectsVersion} />
    </section>
  );
}
