// Talking to the hub: the member token (this tab's sessionStorage, sent as a Bearer
// header, never in a URL) and one fetch wrapper that turns answers into data or errors.

const TOKEN_KEY = "agentpost.token";

/** The hub answered with an error body {"error": {"code", "message"}}. */
export class HubError extends Error {
  constructor(status, code, message, extra) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = extra || {};
  }
}

/** No answer came back: the request may or may not have been handled. */
export class NetworkError extends Error {}

let unauthorized = () => {};

/** Called with the HubError of any 401: the page returns to the sign-in form. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

async function send(method, path, options) {
  const headers = { Authorization: "Bearer " + (token() || "") };
  let body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  } else if (options.form !== undefined) {
    body = options.form;
  }
  if (options.key) headers["Idempotency-Key"] = options.key;
  let res;
  try {
    res = await fetch(path, { method, headers, body, signal: options.signal, cache: "no-store" });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new NetworkError("the hub could not be reached");
  }
  if (res.ok) return res;
  let error = { code: "http_" + res.status, message: res.statusText || "refused" };
  try {
    const parsed = await res.json();
    if (parsed && parsed.error && typeof parsed.error.code === "string") error = parsed.error;
  } catch (_) {
    // Not our JSON (a proxy's page): keep the status line.
  }
  const { code, message, ...extra } = error;
  const failure = new HubError(res.status, code, message, extra);
  if (res.status === 401) unauthorized(failure);
  throw failure;
}

/** JSON in, JSON out: {status, headers, body}. */
export async function call(method, path, options = {}) {
  const res = await send(method, path, options);
  let body = null;
  try {
    body = await res.json();
  } catch (_) {
    throw new NetworkError("the answer was cut off");
  }
  return { status: res.status, headers: res.headers, body };
}

/** The bytes of a media file, as a Blob. */
export async function blob(path, options = {}) {
  const res = await send("GET", path, options);
  return res.blob();
}
