// Request signing with GPUPOOL-HMAC-SHA256 (docs/api.md "Authentication") in the browser's
// WebCrypto: the canonical request, SHA-256 of the body, and the Authorization header. The
// console signs exactly one request this way — the login — and never keeps the secret key.

const enc = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Lower-case hex SHA-256 of `data`. */
export async function sha256Hex(data: BufferSource): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", data));
}

function percentDecode(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "+") bytes.push(32);
    else if (c === "%" && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...enc.encode(c));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

function percentEncode(s: string): string {
  let out = "";
  for (const b of enc.encode(s)) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** The canonical query: pieces decoded, sorted by name then value, encoded again. */
export function canonicalQuery(query: string): string {
  const pairs = query
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=");
      return eq < 0 ? [percentDecode(p), ""] : [percentDecode(p.slice(0, eq)), percentDecode(p.slice(eq + 1))];
    });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join("&");
}

/** The six lines the signature covers. */
export async function canonicalRequest(
  method: string,
  pathAndQuery: string,
  body: string,
  timestampMs: number,
  nonce: string,
): Promise<string> {
  const q = pathAndQuery.indexOf("?");
  const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
  const query = q < 0 ? "" : pathAndQuery.slice(q + 1);
  return [method, path, canonicalQuery(query), await sha256Hex(enc.encode(body)), String(timestampMs), nonce].join("\n");
}

/** HMAC-SHA256(secret, text) as lower-case hex. */
export async function hmacHex(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return hex(await crypto.subtle.sign("HMAC", key, enc.encode(text)));
}

/** 32 random hex digits. */
export function newNonce(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return hex(b.buffer);
}

/** The Authorization header of one request signed with `accessKey` and `secretKey`. */
export async function authorization(
  accessKey: string,
  secretKey: string,
  method: string,
  pathAndQuery: string,
  body: string,
  timestampMs = Date.now(),
  nonce = newNonce(),
): Promise<string> {
  const signature = await hmacHex(secretKey, await canonicalRequest(method, pathAndQuery, body, timestampMs, nonce));
  return `GPUPOOL-HMAC-SHA256 Credential=${accessKey}, Timestamp=${timestampMs}, Nonce=${nonce}, Signature=${signature}`;
}
