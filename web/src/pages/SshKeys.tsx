// The user's SSH public keys (docs/api.md "SSH"): the list with fingerprints, a form to add one
// (a line of a .pub file; the server says what is wrong with it, on its field), removal, and how
// to connect once a key is there (gpupool ssh-config, then ssh t-N.gpupool or VS Code).
import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api/client";
import { session } from "../api/session";
import { ActionButton, Empty, ErrorBox, Field, Loading, useAsync } from "../components/ui";
import { formatTime } from "../lib/format";
import { useStore } from "../lib/store";

function AddKeyForm({ user, onAdded }: { user: string; onAdded: () => void }) {
  const [name, setName] = useState("");
  const [key, setKey] = useState("");
  const [errors, setErrors] = useState<Partial<Record<"name" | "public_key", string>>>({});
  const [formError, setFormError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setFormError(null);
    if (!key.trim()) {
      setErrors({ public_key: "paste a line of your public key file (~/.ssh/id_ed25519.pub)" });
      return;
    }
    setBusy(true);
    try {
      await call("addSshKey", { path: { id: user }, body: { public_key: key.trim(), name: name.trim() || undefined } });
      setName("");
      setKey("");
      onAdded();
    } catch (err) {
      const field = err instanceof ApiError ? err.fieldOf(["name", "public_key"]) : null;
      if (field) setErrors({ [field]: messageOf(err) });
      else setFormError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="panel form" onSubmit={submit} data-testid="ssh-key-form" aria-labelledby="ssh-add-title">
      <h2 id="ssh-add-title">Add a key</h2>
      <Field label="Public key" error={errors.public_key} testid="ssh-key-public" hint="One line of a .pub file: ssh-ed25519 AAAA… you@laptop">
        {(f) => (
          <textarea id={f.id} aria-describedby={f.describedBy} aria-invalid={f.invalid} rows={3} value={key} onInput={(e) => setKey((e.target as HTMLTextAreaElement).value)} data-testid="ssh-key-public-input" spellcheck={false} />
        )}
      </Field>
      <Field label="Name" error={errors.name} testid="ssh-key-name" hint="Optional: the key's comment names it otherwise">
        {(f) => <input id={f.id} aria-describedby={f.describedBy} aria-invalid={f.invalid} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} data-testid="ssh-key-name-input" />}
      </Field>
      <ErrorBox error={formError} testid="ssh-key-form-error" />
      <button type="submit" class="btn btn-primary" disabled={busy} data-testid="ssh-key-add">
        Add key
      </button>
    </form>
  );
}

export function SshKeys() {
  const s = useStore(session);
  const user = s?.user_id ?? "";
  const keys = useAsync(() => call("listSshKeys", { path: { id: user } }), [user]);
  return (
    <section class="page" data-testid="page-ssh-keys" aria-labelledby="ssh-title">
      <h1 id="ssh-title">SSH keys</h1>
      <p class="muted">
        These keys log into the running tasks of your projects over SSH. Once a key is here, <code>gpupool ssh-config &gt;&gt; ~/.ssh/config</code> adds your running tasks
        as hosts: <code>ssh t-1.gpupool</code>, or pick the host in VS Code's Remote-SSH.
      </p>
      <section class="panel" aria-labelledby="ssh-list-title" data-testid="ssh-keys">
          <h2 id="ssh-list-title">Your keys</h2>
          <ErrorBox error={keys.error} />
          {!keys.data ? (
            !keys.error && <Loading what="your SSH keys" />
          ) : keys.data.keys.length === 0 ? (
            <Empty>No key yet: SSH into your tasks needs one.</Empty>
          ) : (
            <table class="table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Fingerprint</th>
                  <th scope="col">Added</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.keys.map((k) => (
                  <tr key={k.name} data-testid="ssh-key-row" data-name={k.name}>
                    <td>{k.name}</td>
                    <td>
                      <code>{k.fingerprint}</code> <span class="muted">{k.public_key.split(" ")[0]}</span>
                    </td>
                    <td>{formatTime(k.created_ms)}</td>
                    <td>
                      <ActionButton
                        label="Remove"
                        kind="danger"
                        testid={`ssh-key-remove-${k.name}`}
                        confirm={`Remove the key ${k.name}? It logs into no task from the next connection on.`}
                        run={() => call("removeSshKey", { path: { id: user, name: k.name } }).then(() => keys.reload())}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
      </section>
      <AddKeyForm user={user} onAdded={() => keys.reload()} />
    </section>
  );
}
