// The console's session (contract §1): logging in signs one POST /v1/console/sessions with the
// user's keys in WebCrypto — the secret key stays inside `login`'s scope and never crosses the
// network — and the server answers with an HttpOnly cookie plus the CSRF token kept here. A
// reloaded page recovers its session from GET /v1/console/sessions/current.
import { ApiError, call, setCsrfToken } from "./client";
import { authorization } from "./sign";
import { operations, type ConsoleSession } from "./types.gen";
import { createStore } from "../lib/store";

/** The live session; null when logged out, undefined while the page still asks. */
export const session = createStore<ConsoleSession | null | undefined>(undefined);

function adopt(s: ConsoleSession | null): void {
  setCsrfToken(s?.csrf_token ?? "");
  session.set(s);
}

/** Logs in with an access key and its secret key; throws the server's ApiError. */
export async function login(accessKey: string, secretKey: string): Promise<ConsoleSession> {
  // No body: the server's default session length. The signature covers the empty body.
  const { method, path } = operations.createSession;
  const auth = await authorization(accessKey.trim(), secretKey, method, path, "");
  const s = await call("createSession", { headers: { Authorization: auth } });
  adopt(s);
  return s;
}

/** Asks the server for the session this page's cookie holds (null when there is none). */
export async function restoreSession(): Promise<ConsoleSession | null> {
  try {
    const s = await call("getSession");
    adopt(s);
    return s;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      adopt(null);
      return null;
    }
    throw e;
  }
}

/** Ends the session on the server (the cookie is cleared) and here. */
export async function logout(): Promise<void> {
  try {
    await call("deleteSession");
  } finally {
    adopt(null);
  }
}

/** Forgets the session here after a 401 (the server no longer knows it). */
export function dropSession(): void {
  adopt(null);
}
