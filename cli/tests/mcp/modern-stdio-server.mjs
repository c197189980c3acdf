// A small MCP server on stdio for the MCP revision 2026-07-28 (no `initialize`: each request
// carries its protocol version and client capabilities in `params._meta`), written with the
// official TypeScript library's v2 (`@modelcontextprotocol/server`), for the proxy's tests.
// A client that opens with `initialize` is served the 2025-era protocol instead, from the
// same definition (the library's `serveStdio` picks the era from the first message).
// Its tools: `echo`, which answers its `text`, and `greet`, which asks the client for the
// user's name first: a call without the answer is answered `input_required` (the elicitation
// `name` and a signed `requestState`), and the call again with the answer (`inputResponses`,
// the state echoed) is answered `hello NAME`. Its prompt `welcome` asks the same, in the same
// rounds, and is the message `welcome NAME`. With `MODERN_SERVER_LOG`, each `tools/call` and
// `prompts/get` that reaches the server is appended to that file as one JSON line, the
// JSON-RPC request as it came, so that a test sees what the proxy passed on.
import { appendFileSync } from 'node:fs';
import {
  McpServer,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
  inputResponse,
} from '@modelcontextprotocol/server';
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio';

const text = (text) => ({ type: 'text', text });

// `requestState` comes back from the client, so it is signed (HMAC, with a key of this
// process, valid ten minutes): the library answers a retry whose state does not verify with
// -32602 before `greet` sees it.
const requestState = createRequestStateCodec({ key: crypto.getRandomValues(new Uint8Array(32)) });

function server() {
  const mcp = new McpServer(
    { name: 'modern', version: '1.0.0' },
    { capabilities: { tools: {}, prompts: {} }, requestState: { verify: requestState.verify } }
  );
  // The user's name from a retry's answer, or the round that asks for it (`kind` names what
  // asks, so that one's state is not taken for another's).
  const nameOr = async (ctx, kind) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'name');
    const name = answer.kind === 'elicit' ? answer.content?.name : undefined;
    if (answer.kind === 'elicit' && answer.action !== 'accept') return { declined: answer.action };
    if (typeof name === 'string' && ctx.mcpReq.requestState()?.tool === kind) return { name };
    return {
      round: inputRequired({
        inputRequests: {
          name: inputRequired.elicit({
            message: 'What is your name?',
            requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
          }),
        },
        requestState: await requestState.mint({ tool: kind }),
      }),
    };
  };
  mcp.registerPrompt('welcome', { description: "Asks for the user's name, then welcomes them" }, async (ctx) => {
    const { name, round, declined } = await nameOr(ctx, 'welcome');
    if (round) return round;
    if (declined) throw new Error(`no name given (${declined})`);
    return { messages: [{ role: 'user', content: text(`welcome ${name}`) }] };
  });
  mcp.registerTool(
    'echo',
    {
      description: 'Answers its text',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { text: { type: 'string', description: 'The text to answer' } },
        required: ['text'],
      }),
    },
    async ({ text: said }) => ({ content: [text(said)] })
  );
  mcp.registerTool(
    'greet',
    { description: "Asks for the user's name, then greets them", inputSchema: fromJsonSchema({ type: 'object' }) },
    async (args, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'name');
      const name = answer.kind === 'elicit' ? answer.content?.name : undefined;
      if (answer.kind === 'elicit' && answer.action !== 'accept') {
        return { isError: true, content: [text(`no name given (${answer.action})`)] };
      }
      // No name yet, or no state from the first round: (again) ask for it.
      if (typeof name !== 'string' || ctx.mcpReq.requestState()?.tool !== 'greet') {
        return inputRequired({
          inputRequests: {
            name: inputRequired.elicit({
              message: 'What is your name?',
              requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
            }),
          },
          requestState: await requestState.mint({ tool: 'greet' }),
        });
      }
      return { content: [text(`hello ${name}`)] };
    }
  );
  return mcp;
}

const stdio = new StdioServerTransport();
serveStdio(server, { transport: stdio });
// Each `tools/call` as it came, before the library reads it.
const log = process.env.MODERN_SERVER_LOG;
if (log) {
  const deliver = stdio.onmessage;
  stdio.onmessage = (message, extra) => {
    if (['tools/call', 'prompts/get'].includes(message.method)) {
      appendFileSync(log, `${JSON.stringify(message)}\n`);
    }
    deliver(message, extra);
  };
}
