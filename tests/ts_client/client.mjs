// The TypeScript MCP SDK's client (npm @modelcontextprotocol/sdk, 2025 era: the initialize
// handshake) against a knowmesh-mcp server. Run by tests/test_mcp_eras.py:
//
//   node client.mjs stdio QUERY ID ENV -- COMMAND [ARG...]   spawns COMMAND (knowmesh-mcp serve --stdio ...)
//   node client.mjs http  QUERY ID ENV -- URL                 streamable HTTP, e.g. http://127.0.0.1:8765/mcp
//
// It lists the tools, calls `search` (q QUERY, env ENV) and `read_article` (id ID, env ENV), and
// prints one JSON object on stdout: the negotiated protocol version, the server's name, the tool
// names and both tool results. The SDK itself checks each structuredContent against the tool's
// outputSchema (from tools/list) and throws if it does not fit. Exit code 1 on any failure, with
// the message on stderr.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** A transport that passes everything through and remembers the protocol version the server chose. */
class Watched {
    constructor(inner) {
        this.inner = inner;
        this.protocolVersion = null;
        inner.onmessage = (message, extra) => {
            if (message && message.result && typeof message.result.protocolVersion === 'string') {
                this.protocolVersion = message.result.protocolVersion;
            }
            this.onmessage?.(message, extra);
        };
        inner.onclose = () => this.onclose?.();
        inner.onerror = (error) => this.onerror?.(error);
    }
    get sessionId() { return this.inner.sessionId; }
    start() { return this.inner.start(); }
    send(message, options) { return this.inner.send(message, options); }
    close() { return this.inner.close(); }
    setProtocolVersion(version) { this.inner.setProtocolVersion?.(version); }
}

function usage() {
    process.stderr.write('usage: node client.mjs stdio|http QUERY ID ENV -- COMMAND [ARG...] | URL\n');
    process.exit(2);
}

const [mode, query, id, env, separator, ...target] = process.argv.slice(2);
if (!['stdio', 'http'].includes(mode) || separator !== '--' || target.length === 0) usage();

const inner = mode === 'stdio'
    // The whole environment: the server needs PYTHONPATH, KNOWMESH_* (the SDK passes only HOME, PATH, ... by default).
    ? new StdioClientTransport({ command: target[0], args: target.slice(1), env: { ...process.env }, stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target[0]));
const transport = new Watched(inner);
const client = new Client({ name: 'knowmesh-ts-client-test', version: '0.0.0' });

async function main() {
    await client.connect(transport);
    const listed = await client.listTools();
    const search = await client.callTool({ name: 'search', arguments: { q: query, env } });
    const read = await client.callTool({ name: 'read_article', arguments: { id, env } });
    const server = client.getServerVersion();
    process.stdout.write(JSON.stringify({
        protocolVersion: transport.protocolVersion,
        server: server ? server.name : null,
        tools: listed.tools.map((tool) => tool.name),
        outputSchemas: Object.fromEntries(listed.tools.map((tool) => [tool.name, tool.outputSchema ?? null])),
        search,
        read,
    }) + '\n');
}

try {
    await main();
    await client.close();
} catch (error) {
    process.stderr.write(`ts client (${mode}): ${error && error.stack ? error.stack : error}\n`);
    try { await client.close(); } catch { /* already closed */ }
    process.exit(1);
}
