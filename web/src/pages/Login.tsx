// The login page: an access key and its secret key. The form is uncontrolled so the secret is
// read once, inside the submit handler, handed to login() (which signs the session request in
// WebCrypto) and cleared from the input; it is never stored or sent.
import { useRef, useState } from "preact/hooks";
import { ApiError, messageOf } from "../api/client";
import { login } from "../api/session";
import { Field } from "../components/ui";

export function Login() {
  const form = useRef<HTMLFormElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [keyError, setKeyError] = useState<string | null>(null);

  const onSubmit = async (e: Event) => {
    e.preventDefault();
    const el = form.current!;
    const accessInput = el.elements.namedItem("access_key") as HTMLInputElement;
    const secretInput = el.elements.namedItem("secret_key") as HTMLInputElement;
    const accessKey = accessInput.value.trim();
    setError(null);
    setKeyError(null);
    if (!accessKey) {
      setKeyError("access key is required");
      accessInput.focus();
      return;
    }
    if (!secretInput.value) {
      setError("secret key is required");
      secretInput.focus();
      return;
    }
    setBusy(true);
    try {
      await login(accessKey, secretInput.value);
      secretInput.value = "";
    } catch (err) {
      secretInput.value = "";
      const msg = messageOf(err);
      if (err instanceof ApiError && /access key/.test(msg) && !/signature/.test(msg)) setKeyError(msg);
      else setError(msg);
      secretInput.focus();
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login" id="main">
      <form ref={form} class="login-card" onSubmit={onSubmit} data-testid="login-form" aria-labelledby="login-title" novalidate>
        <h1 id="login-title">gpupool console</h1>
        <p class="muted">Log in with an access key and its secret key (from <code>gpupool login</code> or your admin). The secret key signs the login in this page and is never sent.</p>
        <Field label="Access key" error={keyError} testid="login-access-key">
          {({ id, describedBy, invalid }) => (
            <input id={id} name="access_key" autocomplete="username" spellcheck={false} aria-describedby={describedBy} aria-invalid={invalid} data-testid="login-access-key" required />
          )}
        </Field>
        <Field label="Secret key" testid="login-secret-key">
          {({ id, describedBy }) => (
            <input id={id} name="secret_key" type="password" autocomplete="current-password" aria-describedby={describedBy} data-testid="login-secret-key" required />
          )}
        </Field>
        {error && (
          <div class="error-box" role="alert" data-testid="login-error">
            {error}
          </div>
        )}
        <button type="submit" class="btn btn-primary" disabled={busy} data-testid="login-submit">
          {busy ? "Logging in…" : "Log in"}
        </button>
      </form>
    </main>
  );
}
