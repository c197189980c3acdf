// An MCP server on stdio that is an MCP server on streamable HTTP: every message is passed
// on as it came, both ways (the official SDK's client transport resumes a stream the server
// closes, with Last-Event-ID, as the server's `retry:` asks).
//
//   node bridge.mjs URL
//
// After `notifications/initialized` the transport opens the session's own event stream (a
// GET), on which the server may send requests unrelated to a call; the messages that follow
// wait until it is open (at most 2 s), as an HTTP client's would not need to: over stdio they
// would otherwise race it.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

let opened;
const sessionStream = new Promise((resolve) => (opened = resolve));
const fetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const response = await fetch(input, init);
  if ((init?.method ?? 'GET') === 'GET') opened();
  return response;
};

const upstream = new StreamableHTTPClientTransport(new URL(process.argv[2]));
const stdio = new StdioServerTransport();
const initializing = new Set();
let ready = Promise.resolve();
stdio.onmessage = (message) => {
  if (message.method === 'initialize') initializing.add(message.id);
  const sent = ready
    .then(() => upstream.send(message))
    .catch((e) => console.error(`bridge: ${e}`));
  if (message.method === 'notifications/initialized') {
    const timeout = new Promise((resolve) => setTimeout(resolve, 2000));
    ready = sent.then(() => Promise.race([sessionStream, timeout]));
  }
};
upstream.onmessage = (message) => {
  if (message.method === undefined && initializing.delete(message.id) && message.result) {
    upstream.setProtocolVersion(message.result.protocolVersion);
  }
  stdio.send(message).catch((e) => console.error(`bridge: ${e}`));
};
upstream.onerror = (e) => console.error(`bridge: ${e}`);
stdio.onclose = () => {
  upstream
    .terminateSession()
    .catch(() => {})
    .finally(() => process.exit(0));
};
await upstream.start();
await stdio.start();
