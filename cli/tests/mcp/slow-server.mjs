// A small MCP server written with the official TypeScript library (@modelcontextprotocol/sdk),
// for the proxy's tests: a tool that takes its time, one that ends the server mid-call, one that
// fails once, and one that answers a secret. On stdio; with `--http`, on MCP's streamable-HTTP transport (stateless)
// at http://127.0.0.1:PORT/mcp, printing {"port": PORT} once it listens.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import http from "node:http";

let calls = 0;

function server() {
  const server = new McpServer({ name: "slow", version: "1.0.0" });
  server.registerTool("sleep", { description: "Answers after 30 seconds" }, async () => {
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    return { content: [{ type: "text", text: "slept" }] };
  });
  server.registerTool("crash", { description: "Ends the server before it answers" }, async () => {
    setTimeout(() => process.exit(3), 300);
    return new Promise(() => {});
  });
  // Fails its first call in each server process, then answers.
  server.registerTool("flaky", { description: "Fails once, then works" }, async () => {
    calls += 1;
    return calls === 1
      ? { content: [{ type: "text", text: "connection reset" }], isError: true }
      : { content: [{ type: "text", text: `worked on call ${calls}` }] };
  });
  server.registerTool("secret", { description: "Answers the deploy token" }, async () => ({
    content: [{ type: "text", text: "token = ghp_httpT0ken99" }],
  }));
  return server;
}

if (process.argv[2] === "--http") {
  const listener = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const mcp = server();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      transport.close();
      mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  listener.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ port: listener.address().port }));
  });
} else {
  await server().connect(new StdioServerTransport());
}
