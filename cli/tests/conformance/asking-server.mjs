// An MCP server on streamable HTTP for the proxy's own tests, written with the official
// TypeScript library. Its tools:
// - `ask` puts a question to the client on the call's own event stream (an
//   `elicitation/create` related to the call) and answers with the client's answer;
// - `reconnect` closes the call's event stream (it has an event id and a `retry:`, so a
//   client resumes it), then answers on the resumed stream;
// - `log` sends a log message on the call's stream, then answers.
// Listens on 127.0.0.1 at a free port, printing {"port": PORT} once it does.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

const sessions = new Map();

function server() {
  const mcp = new McpServer({ name: 'asking', version: '1.0.0' }, { capabilities: { logging: {} } });
  mcp.registerTool('ask', { description: 'Asks the client, on the call stream' }, async (extra) => {
    const answer = await extra.sendRequest(
      {
        method: 'elicitation/create',
        params: {
          message: 'Go on?',
          requestedSchema: { type: 'object', properties: { go: { type: 'boolean' } } },
        },
      },
      ElicitResultSchema
    );
    return { content: [{ type: 'text', text: `answered ${answer.action} ${JSON.stringify(answer.content)}` }] };
  });
  mcp.registerTool('reconnect', { description: 'Closes its stream, then answers' }, async (extra) => {
    await new Promise((go) => setTimeout(go, 50));
    if (!extra.closeSSEStream) {
      throw new Error('the stream cannot be closed: no event store, or protocol before 2025-11-25');
    }
    extra.closeSSEStream();
    await new Promise((go) => setTimeout(go, 300));
    return { content: [{ type: 'text', text: 'answered after the stream was resumed' }] };
  });
  mcp.registerTool('log', { description: 'Logs, then answers' }, async (extra) => {
    await extra.sendNotification({
      method: 'notifications/message',
      params: { level: 'info', data: 'a log message before the answer' },
    });
    return { content: [{ type: 'text', text: 'answered after a log message' }] };
  });
  return mcp;
}

const listener = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
  let transport = sessions.get(req.headers['mcp-session-id']);
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new InMemoryEventStore(),
      retryInterval: 100,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    await server().connect(transport);
  }
  await transport.handleRequest(req, res, body);
});
listener.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: listener.address().port }));
});
