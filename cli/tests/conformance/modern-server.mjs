// An MCP server on streamable HTTP for the MCP revision 2026-07-28 (stateless: no session,
// no `initialize`; each request carries its protocol version and client capabilities in
// `params._meta`), against which every server scenario of the official conformance suite
// at 2026-07-28 passes, written with the official TypeScript library's v2
// (`@modelcontextprotocol/server`, the first to speak 2026-07-28). Like
// `conformance-server.mjs` (the same suite at 2025-11-25, on the v1 library), it is written
// from what the suite checks: the tools, resources and prompts it calls by name, and how it
// expects the server to answer. It serves the tasks extension too
// (`io.modelcontextprotocol/tasks`), whose scenarios the suite at 2026-07-28 runs only when
// named (`--scenario NAME --force`): a call that declares the extension may be answered with
// a task, which goes on after the call and which `tasks/get`, `tasks/update` and
// `tasks/cancel` reach by its id.
// 2026-07-28 requests are served by the library's `createMcpHandler`, a fresh server per
// request; 2025-era requests (`initialize`, then `Mcp-Session-Id`) by sessions of its own,
// from the same definition of the server, so that the 2025-11-25 scenarios pass too.
// Its HTTP layer, as a local server's should, takes only requests whose Host (and Origin,
// when there is one) is 127.0.0.1 or localhost.
// Listens on 127.0.0.1 at a free port, printing {"port": PORT} once it does.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CLIENT_CAPABILITIES_META_KEY,
  McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  WebStandardStreamableHTTPServerTransport,
  acceptedContent,
  createMcpHandler,
  createRequestStateCodec,
  fromJsonSchema,
  hostHeaderValidationResponse,
  inputRequired,
  inputResponse,
  isInitializeRequest,
  isLegacyRequest,
  originValidationResponse,
} from '@modelcontextprotocol/server';

// A 1x1 red PNG, and an 8-sample silent WAV (8 kHz, 8-bit mono).
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const WAV = 'UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==';

const text = (text) => ({ type: 'text', text });
const noArguments = fromJsonSchema({ type: 'object', properties: {} });
const stringArguments = (properties) =>
  fromJsonSchema({
    type: 'object',
    properties: Object.fromEntries(
      Object.entries(properties).map(([name, description]) => [name, { type: 'string', description }])
    ),
    required: Object.keys(properties),
  });
// An elicitation form asking for one string.
const askFor = (message, field) =>
  inputRequired.elicit({
    message,
    requestedSchema: { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] },
  });

// `requestState` comes back from the client, so it is signed (HMAC, with a key of this
// process, valid ten minutes): the library rejects a retry whose state does not verify with
// -32602 before a tool sees it (input-required-result-tampered-state), and hands a tool the
// state's payload through `ctx.mcpReq.requestState()`.
const requestState = createRequestStateCodec({ key: crypto.getRandomValues(new Uint8Array(32)) });

// The tasks extension (SEP-2663). A tool called with the extension in the request's client
// capabilities may answer a CreateTaskResult and go on working after the call. Each
// 2026-07-28 request has a server of its own, so the tasks live here, in the process, where
// the tasks methods of later requests find them by id. A task is forgotten, and stopped,
// when its `ttlMs` (ten minutes from its start) is up.
const TASKS = 'io.modelcontextprotocol/tasks';
const TASK_TTL_MS = 10 * 60 * 1000;
const tasks = new Map();
const declaresTasks = (ctx) =>
  ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY]?.extensions?.[TASKS] !== undefined;
// tasks-required-task-error, tasks-capability-negotiation: -32021, naming the extension
const missingTasks = () =>
  new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
const isTerminal = (status) => ['completed', 'failed', 'cancelled'].includes(status);

// What every status of a task shows (tasks-wire-fields: `ttlMs` and `pollIntervalMs`, in
// integer milliseconds), and what tasks/get adds for the status it is in: the questions still
// open, the result, or the JSON-RPC error (tasks-lifecycle, tasks-mrtr-input).
function taskInfo({ taskId, status, createdAt, lastUpdatedAt }) {
  return { taskId, status, createdAt, lastUpdatedAt, ttlMs: TASK_TTL_MS, pollIntervalMs: 200 };
}
function detailedTask(task) {
  const details = taskInfo(task);
  if (task.status === 'input_required') {
    details.inputRequests = Object.fromEntries([...task.questions].map(([key, { request }]) => [key, request]));
  }
  if (task.status === 'completed') details.result = task.result;
  if (task.status === 'failed') details.error = task.error;
  return details;
}
function moveTask(task, status, fields = {}) {
  Object.assign(task, fields, { status, lastUpdatedAt: new Date().toISOString() });
}

// Starts `work` as a task, and answers the CreateTaskResult, the task already stored so that
// a tasks/get right after it finds it (tasks-dispatch-and-envelope). `work` is given the
// task's abort signal and `ask`. What it returns completes the task; a ProtocolError it
// throws fails the task, the error inlined; any other exception completes it as a tool
// error, as the library answers one in a call.
function startTask(work) {
  const now = new Date().toISOString();
  const task = {
    taskId: randomUUID(),
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    questions: new Map(),
    abort: new AbortController(),
  };
  tasks.set(task.taskId, task);
  setTimeout(() => {
    task.abort.abort();
    tasks.delete(task.taskId);
  }, TASK_TTL_MS).unref();
  // A task cancelled meanwhile stays cancelled.
  const settle = (status, fields) => {
    if (!isTerminal(task.status)) moveTask(task, status, fields);
  };
  const created = { resultType: 'task', ...taskInfo(task) };
  Promise.resolve()
    .then(() => work({ signal: task.abort.signal, ask: (inputRequests) => askTask(task, inputRequests) }))
    .then(
      (result) => settle('completed', { result }),
      (error) => {
        if (error instanceof ProtocolError) {
          const { code, message, data } = error;
          settle('failed', { error: { code, message, ...(data !== undefined && { data }) } });
        } else {
          const message = error instanceof Error ? error.message : String(error);
          settle('completed', { result: { content: [text(message)], isError: true } });
        }
      }
    );
  return created;
}

// `ask` of a task: parks it in input_required with `inputRequests` (keyed and shaped as in
// MRTR) until tasks/update has answered them all, and gives the answers, keyed alike.
function askTask(task, inputRequests) {
  return new Promise((answered, cancelled) => {
    const answers = {};
    for (const [key, request] of Object.entries(inputRequests)) {
      const answer = (response) => {
        answers[key] = response;
        if (task.questions.size === 0) answered(answers);
      };
      task.questions.set(key, { request, answer });
    }
    task.abort.signal.addEventListener('abort', () => cancelled(task.abort.signal.reason), { once: true });
    moveTask(task, 'input_required');
  });
}

// tasks/update: answers the questions open under those keys (any other key is ignored); the
// task stays in input_required until the last one is answered (tasks-mrtr-input).
function answerTask(task, responses) {
  for (const [key, response] of Object.entries(responses)) {
    const question = task.questions.get(key);
    if (question === undefined) continue;
    task.questions.delete(key);
    if (task.questions.size === 0) moveTask(task, 'working');
    question.answer(response);
  }
}

// tasks/cancel: a task still going is cancelled at once and its work stopped; one that has
// ended is left as it is, and the cancel acknowledged all the same (tasks-lifecycle).
function cancelTask(task) {
  if (isTerminal(task.status)) return;
  task.questions.clear();
  moveTask(task, 'cancelled');
  task.abort.abort();
}

// The 2026-07-28 handler; the triggers of server-stateless publish list changes on it.
let modern;

function server() {
  const mcp = new McpServer(
    { name: 'modern-conformance', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        completions: {},
        logging: {},
        // tasks-capability-negotiation
        extensions: { [TASKS]: {} },
      },
      requestState: { verify: requestState.verify },
    }
  );
  const tool = (name, description, inputSchema, call) =>
    mcp.registerTool(name, { description, inputSchema }, call);

  // tools-call-simple-text, -image, -audio, -embedded-resource, -mixed-content
  tool('test_simple_text', 'Answers with a text', noArguments, async () => ({
    content: [text('This is a simple text response for testing.')],
  }));
  tool('test_image_content', 'Answers with an image', noArguments, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  tool('test_audio_content', 'Answers with a sound', noArguments, async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  tool('test_embedded_resource', 'Answers with an embedded resource', noArguments, async () => ({
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }));
  tool(
    'test_multiple_content_types',
    'Answers with a text, an image and an embedded resource',
    noArguments,
    async () => ({
      content: [
        text('Multiple content types test:'),
        { type: 'image', data: PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    })
  );
  // tools-call-error: the library answers a tool's exception with `isError`
  tool('test_error_handling', 'Always fails', noArguments, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  // tools-call-with-progress: progress 0, 50 and 100 of 100, 50 ms apart, when asked for
  tool('test_tool_with_progress', 'Reports its progress while it runs', noArguments, async (args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (progress > 0) await sleep(50);
      if (progressToken !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100 },
        });
      }
    }
    return { content: [text('Tool with progress executed successfully')] };
  });
  // tools-call-with-logging (2025-11-25): three log messages, 50 ms apart; the library sends
  // none to a 2026-07-28 request without `_meta` logLevel
  tool('test_tool_with_logging', 'Logs three messages while it runs', noArguments, async (args, ctx) => {
    const messages = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
    for (const [i, data] of messages.entries()) {
      if (i > 0) await sleep(50);
      await ctx.mcpReq.log('info', data);
    }
    return { content: [text('Tool with logging executed successfully')] };
  });
  // server-sse-polling (2025-11-25): closes the call's event stream, so that the client
  // resumes it, and answers on the resumed stream
  tool('test_reconnection', 'Closes its event stream, then answers', noArguments, async (args, ctx) => {
    ctx.http?.closeSSE?.();
    await sleep(200);
    return { content: [text('Reconnection test completed successfully')] };
  });
  // json-schema-2020-12: its input schema is listed as it is, `$schema`, `$defs`, `$anchor`,
  // `allOf`/`anyOf`, `if`/`then`/`else` and all
  tool(
    'json_schema_2020_12_tool',
    'Tool with JSON Schema 2020-12 features',
    fromJsonSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: {
          $anchor: 'addressDef',
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' },
      },
      allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
      if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
      then: { required: ['phone'] },
      else: { required: ['email'] },
      additionalProperties: false,
    }),
    async (args) => ({ content: [text(`Received ${JSON.stringify(args)}`)] })
  );
  // http-custom-header-server-validation: `region` is mirrored in the header Mcp-Param-Region
  tool(
    'test_x_mcp_header',
    'Answers its region, which comes in a header too',
    fromJsonSchema({
      type: 'object',
      properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, level: { type: 'integer' } },
    }),
    async ({ region }) => ({ content: [text(`region=${region ?? '<none>'}`)] })
  );

  // Questions to the client. At 2026-07-28 a tool asks by answering `input_required` and is
  // called again with the answers (`ctx.mcpReq.inputResponses`); on a 2025-era session the
  // library asks the client itself, on the call's stream, and calls the tool again.

  // tools-call-elicitation, elicitation-sep1034-defaults, elicitation-sep1330-enums (2025-11-25)
  const elicitTool = (name, description, inputSchema, message, requestedSchema) =>
    tool(name, description, inputSchema, async (args, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'answer');
      if (answer.kind !== 'elicit') {
        return inputRequired({
          inputRequests: { answer: inputRequired.elicit({ message: message(args), requestedSchema }) },
        });
      }
      const content = JSON.stringify(answer.content ?? {});
      return { content: [text(`Elicitation completed: action=${answer.action}, content=${content}`)] };
    });
  elicitTool(
    'test_elicitation',
    "Asks the client for the user's name and email",
    stringArguments({ message: 'The message to show the user' }),
    ({ message }) => message,
    {
      type: 'object',
      properties: {
        username: { type: 'string', description: "User's response" },
        email: { type: 'string', description: "User's email address" },
      },
      required: ['username', 'email'],
    }
  );
  elicitTool(
    'test_elicitation_sep1034_defaults',
    'Asks the client for values that have defaults',
    noArguments,
    () => 'Please review your information',
    {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'Your name', default: 'John Doe' },
        age: { type: 'integer', description: 'Your age', default: 30 },
        score: { type: 'number', description: 'Your score', default: 95.5 },
        status: {
          type: 'string',
          description: 'Your status',
          enum: ['active', 'inactive', 'pending'],
          default: 'active',
        },
        verified: { type: 'boolean', description: 'Whether you are verified', default: true },
      },
    }
  );
  elicitTool(
    'test_elicitation_sep1330_enums',
    'Asks the client to choose among enums of each kind',
    noArguments,
    () => 'Please choose',
    {
      type: 'object',
      properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          oneOf: [
            { const: 'value1', title: 'First Option' },
            { const: 'value2', title: 'Second Option' },
            { const: 'value3', title: 'Third Option' },
          ],
        },
        legacyEnum: {
          type: 'string',
          enum: ['opt1', 'opt2', 'opt3'],
          enumNames: ['Option One', 'Option Two', 'Option Three'],
        },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: {
          type: 'array',
          items: {
            anyOf: [
              { const: 'value1', title: 'First Choice' },
              { const: 'value2', title: 'Second Choice' },
              { const: 'value3', title: 'Third Choice' },
            ],
          },
        },
      },
    }
  );
  // tools-call-sampling (2025-11-25)
  tool(
    'test_sampling',
    'Asks the client to sample an LLM with the prompt',
    stringArguments({ prompt: 'The prompt to send to the LLM' }),
    async ({ prompt }, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'answer');
      if (answer.kind !== 'sampling') {
        return inputRequired({
          inputRequests: {
            answer: inputRequired.createMessage({
              messages: [{ role: 'user', content: text(prompt) }],
              maxTokens: 100,
            }),
          },
        });
      }
      const { content } = answer.result;
      return {
        content: [text(`LLM response: ${content.type === 'text' ? content.text : JSON.stringify(content)}`)],
      };
    }
  );

  // input-required-result-basic-elicitation; also -result-type, -missing-input-response,
  // -ignore-extra-params and -validate-input: anything but an accepted name is asked again
  tool('test_input_required_result_elicitation', 'Asks for your name', noArguments, async (args, ctx) => {
    const name = acceptedContent(ctx.mcpReq.inputResponses, 'user_name')?.name;
    if (typeof name !== 'string') {
      return inputRequired({ inputRequests: { user_name: askFor('What is your name?', 'name') } });
    }
    return { content: [text(`Hello, ${name}!`)] };
  });
  // input-required-result-basic-sampling
  tool('test_input_required_result_sampling', 'Asks an LLM a question', noArguments, async (args, ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
    if (answer.kind !== 'sampling') {
      return inputRequired({
        inputRequests: {
          capital_question: inputRequired.createMessage({
            messages: [{ role: 'user', content: text('What is the capital of France?') }],
            maxTokens: 100,
          }),
        },
      });
    }
    const { content } = answer.result;
    return { content: [text(`Sampling response: ${content.text ?? JSON.stringify(content)}`)] };
  });
  // input-required-result-basic-list-roots
  tool('test_input_required_result_list_roots', "Asks for the client's roots", noArguments, async (args, ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    if (answer.kind !== 'roots') {
      return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    }
    const uris = answer.roots.map((root) => root.uri).join(', ');
    return { content: [text(`Client exposed ${answer.roots.length} root(s): ${uris}`)] };
  });
  // input-required-result-request-state: a confirmation, with a signed state
  tool('test_input_required_result_request_state', 'Asks for a confirmation', noArguments, async (args, ctx) => {
    if (acceptedContent(ctx.mcpReq.inputResponses, 'confirm') === undefined) {
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: 'Please confirm',
            requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
          }),
        },
        requestState: await requestState.mint({ tool: 'request_state', nonce: randomUUID() }),
      });
    }
    if (ctx.mcpReq.requestState()?.tool !== 'request_state') {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Missing requestState');
    }
    return { content: [text('state-ok: requestState verified and confirmation received')] };
  });
  // input-required-result-multiple-input-requests: an elicitation, a sampling and the roots
  tool(
    'test_input_required_result_multiple_inputs',
    'Asks for a name, a greeting and the roots at once',
    noArguments,
    async (args, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      const name = acceptedContent(responses, 'user_name')?.name;
      const greeting = inputResponse(responses, 'greeting');
      const roots = inputResponse(responses, 'client_roots');
      if (typeof name !== 'string' || greeting.kind !== 'sampling' || roots.kind !== 'roots') {
        return inputRequired({
          inputRequests: {
            user_name: askFor('What is your name?', 'name'),
            greeting: inputRequired.createMessage({
              messages: [{ role: 'user', content: text('Generate a greeting') }],
              maxTokens: 50,
            }),
            client_roots: inputRequired.listRoots(),
          },
          requestState: await requestState.mint({ tool: 'multiple_inputs', nonce: randomUUID() }),
        });
      }
      const hello = greeting.result.content.text ?? 'Hello';
      return { content: [text(`${hello} ${name}: ${roots.roots.length} root(s) visible`)] };
    }
  );
  // input-required-result-multi-round: two questions, one a round; the round is in the state
  tool('test_input_required_result_multi_round', 'Asks two questions, one at a time', noArguments, async (args, ctx) => {
    const state = ctx.mcpReq.requestState();
    const round = state?.tool === 'multi_round' ? state.round : 0;
    const responses = ctx.mcpReq.inputResponses;
    if (round === 0) {
      return inputRequired({
        inputRequests: { step1: askFor('Step 1: What is your name?', 'name') },
        requestState: await requestState.mint({ tool: 'multi_round', round: 1, nonce: randomUUID() }),
      });
    }
    if (round === 1) {
      const name = acceptedContent(responses, 'step1')?.name ?? 'unknown';
      return inputRequired({
        inputRequests: { step2: askFor('Step 2: What is your favorite color?', 'color') },
        requestState: await requestState.mint({ tool: 'multi_round', round: 2, name, nonce: randomUUID() }),
      });
    }
    const color = acceptedContent(responses, 'step2')?.color ?? 'unknown';
    return { content: [text(`Multi-round complete: ${state.name} likes ${color}`)] };
  });
  // input-required-result-tampered-state: a retry whose state does not verify never gets here
  tool('test_input_required_result_tampered_state', 'Asks for a confirmation, with a signed state', noArguments, async (args, ctx) => {
    if (ctx.mcpReq.requestState() !== undefined && acceptedContent(ctx.mcpReq.inputResponses, 'confirm')) {
      return { content: [text('integrity-ok: requestState verified')] };
    }
    return inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({
          message: 'Please confirm',
          requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
        }),
      },
      requestState: await requestState.mint({ tool: 'tampered_state', nonce: randomUUID() }),
    });
  });
  // input-required-result-capability-check: asks only what the client said it can answer
  tool('test_input_required_result_capabilities', 'Asks what the client can answer', noArguments, async (args, ctx) => {
    if (ctx.mcpReq.inputResponses !== undefined) {
      return { content: [text('Capability-aware input requests fulfilled')] };
    }
    const declared = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? {};
    const inputRequests = {};
    if (declared.elicitation) inputRequests.user_name = askFor('What is your name?', 'name');
    if (declared.sampling) {
      inputRequests.greeting = inputRequired.createMessage({
        messages: [{ role: 'user', content: text('Generate a short greeting') }],
        maxTokens: 50,
      });
    }
    if (declared.roots) inputRequests.client_roots = inputRequired.listRoots();
    if (Object.keys(inputRequests).length === 0) {
      return { content: [text('The client can answer no question')] };
    }
    return inputRequired({ inputRequests });
  });

  // server-stateless: a tool that needs sampling, which the suite calls without declaring
  // it (the library answers -32021); a plain call whose stream the suite inspects; a log
  // without `_meta` logLevel, which the library drops; and two that publish list changes on
  // the open `subscriptions/listen` streams.
  tool('test_missing_capability', 'Asks an LLM, so it needs sampling', noArguments, async (args, ctx) => {
    if (inputResponse(ctx.mcpReq.inputResponses, 'llm_answer').kind !== 'sampling') {
      return inputRequired({
        inputRequests: {
          llm_answer: inputRequired.createMessage({
            messages: [{ role: 'user', content: text('Reply with the single word: pong') }],
            maxTokens: 16,
          }),
        },
      });
    }
    return { content: [text('sampling round-trip complete')] };
  });
  tool('test_streaming_elicitation', 'Answers on its stream', noArguments, async () => ({
    content: [text('stream observed: result frames only')],
  }));
  tool('test_logging_tool', 'Logs a message', noArguments, async (args, ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran');
    return { content: [text('logged')] };
  });
  tool('test_trigger_tool_change', 'Says the tools changed', noArguments, async () => {
    modern.notify.toolsChanged();
    return { content: [text('tools_list_changed published')] };
  });
  tool('test_trigger_prompt_change', 'Says the prompts changed', noArguments, async () => {
    modern.notify.promptsChanged();
    return { content: [text('prompts_list_changed published')] };
  });

  // The tasks extension's tools (the tasks-* scenarios). A task tool called with the
  // extension declared answers a task; without it, one whose task support is 'optional'
  // runs in the call, and one whose support is 'required' is refused (by tools/call below).
  const taskSupport = new Map();
  const taskTool = (name, description, inputSchema, support, work) => {
    taskSupport.set(name, support);
    tool(name, description, inputSchema, async (args, ctx) =>
      declaresTasks(ctx) ? startTask((task) => work(args, task)) : work(args, { signal: ctx.mcpReq.signal })
    );
  };
  const confirmation = (message) =>
    inputRequired.elicit({
      message,
      requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] },
    });
  // A tool that never makes a task (tasks-lifecycle, tasks-request-headers).
  tool('greet', 'Greets someone', stringArguments({ name: 'Whom to greet' }), async ({ name }) => ({
    content: [text(`Hello, ${name}!`)],
  }));
  // Works `seconds` seconds, or until its task is cancelled.
  taskTool(
    'slow_compute',
    'Computes for a while',
    fromJsonSchema({
      type: 'object',
      properties: { seconds: { type: 'number', minimum: 0 }, label: { type: 'string' } },
      required: ['seconds'],
    }),
    'optional',
    async ({ seconds, label }, { signal }) => {
      await sleep(seconds * 1000, undefined, { signal });
      return { content: [text(`${label ?? 'slow_compute'}: done after ${seconds} s`)] };
    }
  );
  // A tool error, which completes the task (`isError`) rather than fail it.
  taskTool('failing_job', 'Fails after a second', noArguments, 'required', async (args, { signal }) => {
    await sleep(1000, undefined, { signal });
    return { content: [text('failing_job failed, as it always does')], isError: true };
  });
  // A JSON-RPC error, which fails the task.
  taskTool('protocol_error_job', 'Breaks down', noArguments, 'optional', async () => {
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'protocol_error_job broke down');
  });
  // One question, asked through the task (tasks-mrtr-input, tasks-dispatch-and-envelope).
  taskTool(
    'confirm_delete',
    'Deletes a file once you confirm it',
    stringArguments({ filename: 'The file to delete' }),
    'required',
    async ({ filename }, { ask }) => {
      const answers = await ask({ confirm: confirmation(`Delete ${filename}?`) });
      const deleted = acceptedContent(answers, 'confirm')?.confirm === true;
      return { content: [text(deleted ? `Deleted ${filename}` : `Kept ${filename}`)] };
    }
  );
  // Two questions at once, which may be answered one at a time (tasks-mrtr-input).
  taskTool('multi_input', 'Asks your name and a confirmation', noArguments, 'required', async (args, { ask }) => {
    const answers = await ask({ name: askFor('What is your name?', 'name'), confirm: confirmation('Go on?') });
    const name = acceptedContent(answers, 'name')?.name ?? 'unknown';
    const confirmed = acceptedContent(answers, 'confirm')?.confirm === true;
    return { content: [text(`${name} ${confirmed ? 'confirmed' : 'did not confirm'}`)] };
  });
  // tasks-mrtr-composition: asks for a name in the call (MRTR), then greets it in a task.
  taskSupport.set('test_tool_with_task', 'required');
  tool('test_tool_with_task', 'Asks your name, then greets you in a task', noArguments, async (args, ctx) => {
    const name = acceptedContent(ctx.mcpReq.inputResponses, 'user_name')?.name;
    if (typeof name !== 'string') {
      return inputRequired({ inputRequests: { user_name: askFor('What is your name?', 'name') } });
    }
    return startTask(async () => ({ content: [text(`Hello, ${name}!`)] }));
  });
  // tools/call in front of the library's handler, which knows no tasks (2.4.0; it keeps its
  // handlers in `_requestHandlers`): a tool that requires a task is refused to a call without
  // the extension (tasks-required-task-error: -32021, where the library would answer an
  // exception of the tool as an `isError` result), and a CreateTaskResult leaves without the
  // empty `content` that the library's CallToolResult check gives a result without one.
  const callTool = mcp.server._requestHandlers.get('tools/call');
  mcp.server._requestHandlers.set('tools/call', async (request, ctx) => {
    if (taskSupport.get(request.params?.name) === 'required' && !declaresTasks(ctx)) throw missingTasks();
    const result = await callTool(request, ctx);
    if (result.resultType !== 'task') return result;
    const { content, ...created } = result;
    return created;
  });
  // tasks/get, tasks/update and tasks/cancel, for a call that declares the extension
  // (-32021 otherwise) and a task of this process (-32602 otherwise). tasks/result and
  // tasks/list, which the extension dropped, the library answers -32601
  // (tasks-dispatch-and-envelope).
  const taskIdParams = fromJsonSchema({ type: 'object', properties: { taskId: { type: 'string' } }, required: ['taskId'] });
  const taskMethod = (method, answer) =>
    mcp.server.setRequestHandler(method, { params: taskIdParams }, async ({ taskId }, ctx) => {
      if (!declaresTasks(ctx)) throw missingTasks();
      const task = tasks.get(taskId);
      if (task === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown task: ${taskId}`);
      return answer(task, ctx);
    });
  taskMethod('tasks/get', (task) => detailedTask(task));
  // The answers come as `inputResponses`, which the library hands over as on a retried call.
  taskMethod('tasks/update', (task, ctx) => {
    answerTask(task, ctx.mcpReq.inputResponses ?? {});
    return {};
  });
  taskMethod('tasks/cancel', (task) => {
    cancelTask(task);
    return {};
  });

  // resources-list, resources-read-text, resources-read-binary; `test://watched-resource`
  // for the 2025-era resources-subscribe and resources-unsubscribe. An unknown URI is
  // answered -32602 (sep-2164-resource-not-found) by the library.
  const resource = (name, uri, description, mimeType, content) =>
    mcp.registerResource(name, uri, { description, mimeType }, async () => ({
      contents: [{ uri, mimeType, ...content }],
    }));
  resource('static-text', 'test://static-text', 'A text', 'text/plain', {
    text: 'This is the content of the static text resource.',
  });
  resource('static-binary', 'test://static-binary', 'An image', 'image/png', { blob: PNG });
  resource('watched-resource', 'test://watched-resource', 'A text to subscribe to', 'text/plain', {
    text: 'This resource never changes.',
  });
  // resources-templates-read
  mcp.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'The data of an id', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    })
  );
  // The resources never change, so a (2025-era) subscription has nothing to send.
  for (const method of ['resources/subscribe', 'resources/unsubscribe']) {
    mcp.server.setRequestHandler(method, async () => ({}));
  }

  // prompts-get-simple, -with-args, -embedded-resource, -with-image
  mcp.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () => ({
    messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }],
  }));
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: stringArguments({ arg1: 'First test argument', arg2: 'Second test argument' }),
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) }],
    })
  );
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      description: 'A prompt that embeds a resource',
      argsSchema: stringArguments({ resourceUri: 'URI of the resource to embed' }),
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
        },
        { role: 'user', content: text('Please process the embedded resource above.') },
      ],
    })
  );
  mcp.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: text('Please analyze the image above.') },
    ],
  }));
  // input-required-result-non-tool-request: a prompt that asks a question first (a prompt
  // without arguments is given only the context)
  mcp.registerPrompt('test_input_required_result_prompt', { description: 'Asks for its context' }, async (ctx) => {
    const context = acceptedContent(ctx.mcpReq.inputResponses, 'user_context')?.context;
    if (typeof context !== 'string') {
      return inputRequired({
        inputRequests: { user_context: askFor('What context should the prompt use?', 'context') },
      });
    }
    return { messages: [{ role: 'user', content: text(`Use the following context: ${context}`) }] };
  });

  // completion-complete: the values of `arg1` that start with what was typed.
  const arg1Values = ['paris', 'park', 'party', 'test', 'testing'];
  mcp.server.setRequestHandler('completion/complete', async ({ params: { ref, argument } }) => {
    const values =
      ref.type === 'ref/prompt' && ref.name === 'test_prompt_with_arguments' && argument.name === 'arg1'
        ? arg1Values.filter((value) => value.startsWith(argument.value))
        : [];
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return mcp;
}

modern = createMcpHandler(server, { legacy: 'reject' });

// server-sse-polling (2025-11-25): the events of a session's streams, so that a client
// whose stream closed resumes it from its `Last-Event-ID`.
function eventStore() {
  const events = [];
  return {
    async storeEvent(streamId, message) {
      const id = `${streamId}:${events.length}`;
      events.push({ id, streamId, message });
      return id;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex(({ id }) => id === lastEventId);
      if (at < 0) throw new Error(`Unknown event: ${lastEventId}`);
      const { streamId } = events[at];
      for (const event of events.slice(at + 1)) {
        if (event.streamId === streamId) await send(event.id, event.message);
      }
      return streamId;
    },
  };
}

// 2025-era sessions: a server and its transport per `Mcp-Session-Id`.
const sessions = new Map();
const refuse = (status, message) =>
  Response.json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }, { status });
async function legacy(request) {
  const session = request.headers.get('mcp-session-id');
  let transport = sessions.get(session);
  if (!transport) {
    // server-session-lifecycle: a session that ended is not found.
    if (session) return refuse(404, 'Session not found');
    const body = request.method === 'POST' ? await request.clone().json().catch(() => undefined) : undefined;
    if (!isInitializeRequest(body)) return refuse(400, 'Bad Request: no session');
    transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: eventStore(),
      retryInterval: 100,
      onsessioninitialized: (id) => sessions.set(id, transport),
      onsessionclosed: (id) => sessions.delete(id),
    });
    await server().connect(transport);
  }
  return transport.handleRequest(request);
}

const listener = http.createServer(async (req, res) => {
  // The request as a web `Request`, aborted when the client goes away.
  const aborted = new AbortController();
  res.on('close', () => aborted.abort());
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  let request;
  try {
    request = new Request(new URL(req.url, `http://${req.headers.host}`), {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
      signal: aborted.signal,
    });
  } catch {
    res.writeHead(400).end();
    return;
  }
  // dns-rebinding-protection: only this server's own address as Host and Origin.
  const own = ['127.0.0.1', 'localhost'];
  const response =
    hostHeaderValidationResponse(request, own) ??
    originValidationResponse(request, own) ??
    (await ((await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request)));
  res.writeHead(response.status, [...response.headers].flat());
  if (response.body) {
    res.flushHeaders();
    try {
      for await (const chunk of response.body) res.write(chunk);
    } catch {
      // The client went away.
    }
  }
  res.end();
});
listener.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: listener.address().port }));
});
