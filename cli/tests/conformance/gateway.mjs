// The conformance suite speaks only streamable HTTP; this puts an MCP server that speaks stdio
// behind it, one child process per MCP session, so that the suite can drive `palisade mcp` on
// stdio (and, as the baseline, the same chain without it).
//
//   node gateway.mjs PORT -- COMMAND [ARGS...]
//
// Stdio carries no link between a server's notification or request and the client's request
// it belongs to: one carrying a request's progress token goes on that request's stream, any
// other on the stream of the latest request in flight, or on the session's own stream when
// none is.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [port, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== '--' || !command) {
  console.error('usage: node gateway.mjs PORT -- COMMAND [ARGS...]');
  process.exit(2);
}
const hosts = new Set([`localhost:${port}`, `127.0.0.1:${port}`]);
const sessions = new Map();

async function open() {
  const child = new StdioClientTransport({ command, args, stderr: 'inherit' });
  // The client's requests in flight, oldest first: [id, progress token].
  const inFlight = [];
  const front = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, { front, child }),
  });
  front.onmessage = (message) => {
    if (message.method !== undefined && message.id !== undefined) {
      inFlight.push([message.id, message.params?._meta?.progressToken]);
    }
    child.send(message).catch((e) => console.error(`gateway: ${e}`));
  };
  child.onmessage = (message) => {
    if (message.method === undefined) {
      const at = inFlight.findIndex(([id]) => id === message.id);
      if (at >= 0) inFlight.splice(at, 1);
      front.send(message).catch((e) => console.error(`gateway: ${e}`));
      return;
    }
    const token = message.params?.progressToken;
    const related =
      inFlight.find(([, t]) => token !== undefined && t === token) ?? inFlight.at(-1);
    front
      .send(message, related ? { relatedRequestId: related[0] } : undefined)
      .catch((e) => console.error(`gateway: ${e}`));
  };
  front.onclose = () => {
    if (front.sessionId) sessions.delete(front.sessionId);
    child.close();
  };
  child.onclose = () => front.close();
  await child.start();
  return front;
}

function refuse(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: message }));
}

http
  .createServer(async (req, res) => {
    try {
      // As the reference server: the Host, and the Origin when there is one, must be this one.
      const origin = req.headers.origin;
      if (!hosts.has(req.headers.host) || (origin && !hosts.has(origin.replace(/^http:\/\//, '')))) {
        return refuse(res, 403, 'not a local Host or Origin');
      }
      let body;
      if (req.method === 'POST') {
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return refuse(res, 400, 'the body is not JSON');
        }
      }
      const id = req.headers['mcp-session-id'];
      let front;
      if (id) {
        front = sessions.get(id)?.front;
        if (!front) return refuse(res, 404, 'no such session');
      } else if (req.method === 'POST' && body?.method === 'initialize') {
        front = await open();
      } else {
        return refuse(res, 400, 'no session');
      }
      await front.handleRequest(req, res, body);
    } catch (e) {
      console.error(`gateway: ${e}`);
      if (!res.headersSent) refuse(res, 500, String(e));
    }
  })
  .listen(Number(port), '127.0.0.1', () => console.log(JSON.stringify({ port: Number(port) })));
