// An MCP server on streamable HTTP whose tool `ask` puts a question to the client on the
// call's own event stream (an `elicitation/create` related to the call, which the reference
// server never sends there) and answers with the client's answer. Listens on 127.0.0.1 at a
// free port, printing {"port": PORT} once it does.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';

const sessions = new Map();

function server() {
  const mcp = new McpServer({ name: 'asking', version: '1.0.0' });
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
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    await server().connect(transport);
  }
  await transport.handleRequest(req, res, body);
});
listener.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: listener.address().port }));
});
