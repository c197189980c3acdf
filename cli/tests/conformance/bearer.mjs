// Preloaded into the conformance suite's node (`--import`): the suite cannot be given
// headers, and `palisade mcp --listen` takes no request without its bearer token. Every
// request the suite sends to PALISADE_CONFORMANCE_ORIGIN gets `Authorization: Bearer
// PALISADE_CONFORMANCE_TOKEN` (fetch and undici's own requests share the global dispatcher;
// the scenarios that craft their headers by hand use `node:http`, patched too).
import http from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { getGlobalDispatcher, setGlobalDispatcher } from 'undici';

const origin = process.env.PALISADE_CONFORMANCE_ORIGIN;
const token = process.env.PALISADE_CONFORMANCE_TOKEN;

function withToken(headers) {
  const value = `Bearer ${token}`;
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() === 'authorization') return headers;
    }
    return [...headers, 'authorization', value];
  }
  if (typeof headers[Symbol.iterator] === 'function') {
    return withToken(Object.fromEntries(headers));
  }
  if (Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) {
    return headers;
  }
  return { ...headers, authorization: value };
}

if (origin && token) {
  setGlobalDispatcher(
    getGlobalDispatcher().compose((dispatch) => (options, handler) => {
      if (String(options.origin) === origin) {
        options = { ...options, headers: withToken(options.headers) };
      }
      return dispatch(options, handler);
    })
  );
}
if (origin && token) {
  const { hostname, port } = new URL(origin);
  const request = http.request;
  http.request = function (options, ...rest) {
    const ours =
      options != null &&
      typeof options === 'object' &&
      !(options instanceof URL) &&
      options.hostname === hostname &&
      String(options.port) === port;
    return request.call(this, ours ? { ...options, headers: withToken(options.headers) } : options, ...rest);
  };
  // The suite imports `node:http` as a module: its bindings take the patched function.
  syncBuiltinESMExports();
}
