// An MCP server on streamable HTTP against which every server scenario of the official MCP
// conformance suite (`@modelcontextprotocol/conformance`) passes, written with the official
// TypeScript library. The suite's own reference server is not published; this one is
// written from what the suite's scenarios check: the tools, resources and prompts they call
// by name, and how they expect the server to answer.
// Its HTTP layer, as a local server's should, takes only requests whose Host (and Origin,
// when there is one) is this server's own address, 127.0.0.1 or localhost with its port.
// Listens on 127.0.0.1 at a free port, printing {"port": PORT} once it does.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

// A 1x1 red PNG, and an 8-sample silent WAV (8 kHz, 8-bit mono).
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const WAV = 'UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==';

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const text = (text) => ({ type: 'text', text });
const noArguments = { type: 'object', properties: {} };
const stringArgument = (name, description) => ({
  type: 'object',
  properties: { [name]: { type: 'string', description } },
  required: [name],
});

function server() {
  const mcp = new Server(
    { name: 'conformance', version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true },
        prompts: {},
        completions: {},
        logging: {},
      },
    }
  );

  // Puts `request` to the client on the call's own event stream, if the client declared
  // `capability`.
  const ask = (extra, capability, request, resultSchema) => {
    if (!mcp.getClientCapabilities()?.[capability]) {
      throw new Error(`the client does not support ${capability}`);
    }
    return extra.sendRequest(request, resultSchema);
  };
  // Asks the client for the user's input, answering with what the user did.
  const elicit = async (extra, message, requestedSchema) => {
    const request = { method: 'elicitation/create', params: { message, requestedSchema } };
    const answer = await ask(extra, 'elicitation', request, ElicitResultSchema);
    const content = JSON.stringify(answer.content ?? {});
    return [text(`Elicitation completed: action=${answer.action}, content=${content}`)];
  };

  // Each tool: its description, its input schema, and what a call does (given the call's
  // arguments and the request's `extra`), returning the result's content.
  const tools = {
    // tools-call-simple-text
    test_simple_text: {
      description: 'Answers with a text',
      inputSchema: noArguments,
      call: async () => [text('This is a simple text response for testing.')],
    },
    // tools-call-image
    test_image_content: {
      description: 'Answers with an image',
      inputSchema: noArguments,
      call: async () => [{ type: 'image', data: PNG, mimeType: 'image/png' }],
    },
    // tools-call-audio
    test_audio_content: {
      description: 'Answers with a sound',
      inputSchema: noArguments,
      call: async () => [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
    },
    // tools-call-embedded-resource
    test_embedded_resource: {
      description: 'Answers with an embedded resource',
      inputSchema: noArguments,
      call: async () => [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    },
    // tools-call-mixed-content
    test_multiple_content_types: {
      description: 'Answers with a text, an image and an embedded resource',
      inputSchema: noArguments,
      call: async () => [
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
    },
    // tools-call-with-logging: three log messages on the call's stream, 50 ms apart
    test_tool_with_logging: {
      description: 'Logs three messages while it runs',
      inputSchema: noArguments,
      call: async (args, extra) => {
        const messages = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
        for (const [i, data] of messages.entries()) {
          if (i > 0) await sleep(50);
          await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
        }
        return [text('Tool with logging executed successfully')];
      },
    },
    // tools-call-error: a failing tool answers with `isError`
    test_error_handling: {
      description: 'Always fails',
      inputSchema: noArguments,
      call: async () => {
        throw new Error('This tool intentionally returns an error for testing');
      },
    },
    // tools-call-with-progress: progress 0, 50 and 100 of 100, 50 ms apart
    test_tool_with_progress: {
      description: 'Reports its progress while it runs',
      inputSchema: noArguments,
      call: async (args, extra) => {
        const progressToken = extra._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
          if (progress > 0) await sleep(50);
          if (progressToken !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken, progress, total: 100 },
            });
          }
        }
        return [text('Tool with progress executed successfully')];
      },
    },
    // tools-call-sampling
    test_sampling: {
      description: 'Asks the client to sample an LLM with the prompt',
      inputSchema: stringArgument('prompt', 'The prompt to send to the LLM'),
      call: async ({ prompt }, extra) => {
        const answer = await ask(
          extra,
          'sampling',
          {
            method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: text(prompt) }], maxTokens: 100 },
          },
          CreateMessageResultSchema
        );
        const { content } = answer;
        return [text(`LLM response: ${content.type === 'text' ? content.text : JSON.stringify(content)}`)];
      },
    },
    // tools-call-elicitation
    test_elicitation: {
      description: "Asks the client for the user's name and email",
      inputSchema: stringArgument('message', 'The message to show the user'),
      call: async ({ message }, extra) =>
        elicit(extra, message, {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" },
          },
          required: ['username', 'email'],
        }),
    },
    // elicitation-sep1034-defaults: a default for each primitive type
    test_elicitation_sep1034_defaults: {
      description: 'Asks the client for values that have defaults',
      inputSchema: noArguments,
      call: async (args, extra) =>
        elicit(extra, 'Please review your information', {
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
        }),
    },
    // elicitation-sep1330-enums: each of the five kinds of enum
    test_elicitation_sep1330_enums: {
      description: 'Asks the client to choose among enums of each kind',
      inputSchema: noArguments,
      call: async (args, extra) =>
        elicit(extra, 'Please choose', {
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
            untitledMulti: {
              type: 'array',
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            },
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
        }),
    },
    // json-schema-2020-12: its input schema is listed as it is, `$schema`, `$defs` and all
    json_schema_2020_12_tool: {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: {
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } },
          },
        },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      },
      call: async (args) => [text(`Received ${JSON.stringify(args)}`)],
    },
    // server-sse-polling: closes the call's event stream (when the client's protocol version
    // allows it), so that the client resumes it, and answers on the resumed stream
    test_reconnection: {
      description: 'Closes its event stream, then answers',
      inputSchema: noArguments,
      call: async (args, extra) => {
        extra.closeSSEStream?.();
        await sleep(200);
        return [text('Reconnection test completed successfully')];
      },
    },
  };
  mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(tools).map(([name, { description, inputSchema }]) => ({
      name,
      description,
      inputSchema,
    })),
  }));
  mcp.setRequestHandler(CallToolRequestSchema, async ({ params }, extra) => {
    const tool = tools[params.name];
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
    try {
      return { content: await tool.call(params.arguments ?? {}, extra) };
    } catch (error) {
      return { isError: true, content: [text(error.message)] };
    }
  });

  // resources-list, resources-read-text, resources-read-binary; `test://watched-resource`
  // for resources-subscribe and resources-unsubscribe.
  const resources = {
    'test://static-text': {
      name: 'static-text',
      description: 'A text',
      mimeType: 'text/plain',
      text: 'This is the content of the static text resource.',
    },
    'test://static-binary': {
      name: 'static-binary',
      description: 'An image',
      mimeType: 'image/png',
      blob: PNG,
    },
    'test://watched-resource': {
      name: 'watched-resource',
      description: 'A text to subscribe to',
      mimeType: 'text/plain',
      text: 'This resource never changes.',
    },
  };
  // resources-templates-read
  const template = /^test:\/\/template\/([^/]+)\/data$/;
  const known = (uri) => {
    if (!resources[uri] && !template.test(uri)) {
      throw new McpError(-32002, `Resource not found: ${uri}`);
    }
  };
  mcp.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(resources).map(([uri, { name, description, mimeType }]) => ({
      uri,
      name,
      description,
      mimeType,
    })),
  }));
  mcp.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'test://template/{id}/data',
        name: 'template',
        description: 'The data of an id',
        mimeType: 'application/json',
      },
    ],
  }));
  mcp.setRequestHandler(ReadResourceRequestSchema, async ({ params: { uri } }) => {
    known(uri);
    const id = uri.match(template)?.[1];
    if (id !== undefined) {
      const data = { id, templateTest: true, data: `Data for ID: ${id}` };
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(data) }] };
    }
    const { mimeType, text, blob } = resources[uri];
    return { contents: [{ uri, mimeType, text, blob }] };
  });
  // The resources never change, so a subscription has nothing to send.
  for (const schema of [SubscribeRequestSchema, UnsubscribeRequestSchema]) {
    mcp.setRequestHandler(schema, async ({ params: { uri } }) => {
      known(uri);
      return {};
    });
  }

  // Each prompt: its description, its arguments, and its messages for given arguments.
  const prompts = {
    // prompts-get-simple
    test_simple_prompt: {
      description: 'A prompt without arguments',
      messages: () => [{ role: 'user', content: text('This is a simple prompt for testing.') }],
    },
    // prompts-get-with-args; its `arg1` is completed for completion-complete
    test_prompt_with_arguments: {
      description: 'A prompt with two arguments',
      arguments: [
        { name: 'arg1', description: 'First test argument', required: true },
        { name: 'arg2', description: 'Second test argument', required: true },
      ],
      messages: ({ arg1, arg2 }) => [
        { role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) },
      ],
    },
    // prompts-get-embedded-resource
    test_prompt_with_embedded_resource: {
      description: 'A prompt that embeds a resource',
      arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
      messages: ({ resourceUri }) => [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        { role: 'user', content: text('Please process the embedded resource above.') },
      ],
    },
    // prompts-get-with-image
    test_prompt_with_image: {
      description: 'A prompt with an image',
      messages: () => [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: text('Please analyze the image above.') },
      ],
    },
  };
  mcp.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(prompts).map(([name, { description, arguments: args }]) => ({
      name,
      description,
      arguments: args,
    })),
  }));
  mcp.setRequestHandler(GetPromptRequestSchema, async ({ params }) => {
    const prompt = prompts[params.name];
    if (!prompt) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${params.name}`);
    const args = params.arguments ?? {};
    const missing = (prompt.arguments ?? []).filter((arg) => arg.required && args[arg.name] === undefined);
    if (missing.length) {
      const names = missing.map((arg) => arg.name).join(', ');
      throw new McpError(ErrorCode.InvalidParams, `Missing arguments: ${names}`);
    }
    return { messages: prompt.messages(args) };
  });

  // completion-complete: the values of `arg1` that start with what was typed.
  const arg1Values = ['paris', 'park', 'party', 'test', 'testing'];
  mcp.setRequestHandler(CompleteRequestSchema, async ({ params: { ref, argument } }) => {
    const values =
      ref.type === 'ref/prompt' && ref.name === 'test_prompt_with_arguments' && argument.name === 'arg1'
        ? arg1Values.filter((value) => value.startsWith(argument.value))
        : [];
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return mcp;
}

const sessions = new Map();

const listener = http.createServer(async (req, res) => {
  let transport = sessions.get(req.headers['mcp-session-id']);
  if (!transport) {
    // dns-rebinding-protection: only this server's own address as Host and Origin.
    const hosts = ['127.0.0.1', 'localhost'].map((name) => `${name}:${listener.address().port}`);
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new InMemoryEventStore(),
      retryInterval: 100,
      enableDnsRebindingProtection: true,
      allowedHosts: hosts,
      allowedOrigins: hosts.map((host) => `http://${host}`),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    await server().connect(transport);
  }
  await transport.handleRequest(req, res);
});
listener.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: listener.address().port }));
});
