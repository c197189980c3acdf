// An MCP server on stdio that is a 2026-07-28 server on streamable HTTP: each request read
// from standard input is POSTed to URL, with the headers that revision has a request carry
// (its version, `Mcp-Method`, and `Mcp-Name` for a tool, prompt, resource or task named in
// printable ASCII, which is all the tests name), and the answer (JSON, or the message of an
// event stream that answers it) is written back as one line. The revision is stateless, so a
// request needs nothing of the ones before it. Notifications are POSTed too; nothing comes
// back for them.
//
//   node modern-bridge.mjs URL
import { createInterface } from 'node:readline';

const url = process.argv[2];
const named = (params) => params?.name ?? params?.uri ?? params?.taskId;

async function post(message) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-method': message.method,
  };
  const version = message.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
  if (version) headers['mcp-protocol-version'] = version;
  const name = named(message.params);
  if (typeof name === 'string' && /^[\x20-\x7e]*$/.test(name)) headers['mcp-name'] = name;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(message) });
  const body = await response.text();
  if (message.id === undefined) return;
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    return body ? JSON.parse(body) : undefined;
  }
  // The answer is the event stream's message with the request's id.
  const messages = body
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
    .filter((data) => data)
    .map((data) => JSON.parse(data));
  return messages.find((m) => m.id === message.id && m.method === undefined);
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const message = JSON.parse(line);
  post(message).then(
    (answer) => answer && process.stdout.write(JSON.stringify(answer) + '\n'),
    (error) => {
      if (message.id === undefined) return;
      const failed = { jsonrpc: '2.0', id: message.id, error: { code: -32603, message: String(error) } };
      process.stdout.write(JSON.stringify(failed) + '\n');
    }
  );
}
