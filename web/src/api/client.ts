// The console's typed API client: one `call(operation, {path, query, body})` for every operation
// of docs/openapi.json (types.gen.ts, generated from it at build time, gives each one's
// parameters and answer). Requests go with the session cookie (credentials same-origin) and the
// session's X-CSRF-Token on every method but GET/HEAD; an error answer becomes an ApiError with
// the server's {code, message}; a 401 anywhere tells the app to show the login page.
import { operations, type ErrorDetail, type Operations } from "./types.gen";

export type OpId = keyof Operations;
type Op<K extends OpId> = Operations[K];
type PathArg<K extends OpId> = Op<K>["path"] extends Record<string, never> ? { path?: undefined } : { path: Op<K>["path"] };
type QueryArg<K extends OpId> = Op<K>["query"] extends Record<string, never> ? { query?: undefined } : { query?: Op<K>["query"] };
type BodyArg<K extends OpId> = undefined extends Op<K>["body"] ? { body?: Op<K>["body"] } : { body: Op<K>["body"] };
export type CallArgs<K extends OpId> = PathArg<K> & QueryArg<K> & BodyArg<K> & { signal?: AbortSignal; headers?: Record<string, string> };

/** An error answer (or a network failure: code "unavailable", status 0). */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorDetail["code"],
    message: string,
    readonly status: number,
  ) {
    super(message);
  }

  /**
   * The form field a 400's message names, among `fields`: messages start with the field
   * ("stop_when: at column 9: …", "gpu_count must be …", "gpu_models: 'x' is not …") or quote it
   * ("unknown field 'gpu_cnt'"); an item's member counts as its list ("volumes[1].path …": volumes).
   */
  fieldOf(fields: readonly string[]): string | null {
    if (this.code !== "invalid_argument") return null;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)(\[\d+\](\.[A-Za-z_][A-Za-z0-9_]*)?)?(:|\s|$)/.exec(this.message);
    if (m && fields.includes(m[1])) return m[1];
    return fields.find((f) => this.message.includes(`'${f}'`)) ?? null;
  }
}

let csrfToken = "";
let onUnauthenticated: (e: ApiError) => void = () => {};

/** The session's CSRF token, sent as X-CSRF-Token on every state-changing request. */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/** Called on every 401 (the session expired, its key was revoked, …). */
export function setUnauthenticatedHandler(handler: (e: ApiError) => void): void {
  onUnauthenticated = handler;
}

function encodeQuery(query: Record<string, unknown> | undefined): string {
  if (!query) return "";
  const parts: string[] = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === "") continue;
    const value = Array.isArray(v) ? v.join(",") : String(v);
    if (Array.isArray(v) && v.length === 0) continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(value)}`);
  }
  return parts.length ? "?" + parts.join("&") : "";
}

/** The path of `op` with its parameters filled in and its query appended. */
export function urlOf(template: string, path: Record<string, unknown> | undefined, query?: Record<string, unknown>): string {
  const filled = template.replace(/\{([a-z_]+)\}/g, (_, name: string) => {
    const v = path?.[name];
    if (v === undefined) throw new Error(`missing path parameter ${name} for ${template}`);
    return encodeURIComponent(String(v));
  });
  return filled + encodeQuery(query);
}

async function errorOf(res: Response): Promise<ApiError> {
  let code: ErrorDetail["code"] = "internal";
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = (await res.json()) as { error?: ErrorDetail };
    if (body.error) ({ code, message } = body.error);
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(code, message, res.status);
}

/**
 * Sends one request and returns the response when it is a success; otherwise throws its
 * ApiError (after telling the app about a 401). `headers` may add e.g. an Authorization.
 */
export async function send(
  method: string,
  url: string,
  init: { body?: BodyInit; json?: boolean; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.json) headers["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD" && csrfToken && !headers.Authorization) headers["X-CSRF-Token"] = csrfToken;
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body: init.body, credentials: "same-origin", signal: init.signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError("unavailable", `cannot reach the server: ${(e as Error).message}`, 0);
  }
  if (res.ok) return res;
  const err = await errorOf(res);
  if (res.status === 401) onUnauthenticated(err);
  throw err;
}

/** Calls one operation of the API and returns its decoded answer. */
export async function call<K extends OpId>(op: K, args: CallArgs<K> = {} as CallArgs<K>): Promise<Op<K>["answer"]> {
  const spec = operations[op];
  const a = args as { path?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown; signal?: AbortSignal; headers?: Record<string, string> };
  const url = urlOf(spec.path, a.path, a.query);
  let body: BodyInit | undefined;
  if (a.body !== undefined) body = spec.body === "binary" ? (a.body as Blob) : JSON.stringify(a.body);
  const res = await send(spec.method, url, { body, json: spec.body === "json" && body !== undefined, signal: a.signal, headers: a.headers });
  switch (spec.answer) {
    case "json":
      return (await res.json()) as Op<K>["answer"];
    case "text":
      return (await res.text()) as Op<K>["answer"];
    case "binary":
      return (await res.blob()) as Op<K>["answer"];
    default:
      return undefined as unknown as Op<K>["answer"];
  }
}

/** A message for any thrown value. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
