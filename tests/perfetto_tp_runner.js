// Runs Perfetto's trace processor (the WebAssembly build inside the Perfetto UI)
// under Node.js and bridges its RPC byte stream to stdin/stdout.
//
//   node perfetto_tp_runner.js DIR
//
// DIR holds engine_bundle.js and trace_processor.wasm. Bytes read from stdin are
// TraceProcessorRpcStream requests; the replies (TraceProcessorRpc messages, each
// framed as a TraceProcessorRpcStream.msg field) go to stdout: the protocol the
// UI speaks to its engine worker over a MessagePort.
'use strict';
const fs = require('fs');
const path = require('path');

const dir = path.resolve(process.argv[2] || '.');
const bundlePath = path.join(dir, 'engine_bundle.js');

// engine_bundle.js is built for a Web Worker only: it refuses to start where
// `process` exists, and it fetches the wasm with a synchronous XMLHttpRequest.
// So evaluate it with those names shadowed: no `process` or `window`, a
// WorkerGlobalScope, a `self` that receives the MessagePort, an XHR reading DIR.
class FileXHR {
  open(method, url) { this.url = url; }
  send() {
    const file = decodeURIComponent(new URL(this.url, 'file://' + dir + '/').pathname);
    this.response = fs.readFileSync(file).buffer;
    this.status = 200;
  }
}
const workerSelf = { location: { href: 'file://' + bundlePath } };
const evaluate = new Function(
  'self', 'process', 'window', 'WorkerGlobalScope', 'XMLHttpRequest', 'importScripts',
  fs.readFileSync(bundlePath, 'utf8'));
evaluate(workerSelf, undefined, undefined, function WorkerGlobalScope() {}, FileXHR,
         undefined);

// The engine replies through port.postMessage and reads port.onmessage.
const port = {
  onmessage: null,
  postMessage(bytes) { fs.writeSync(1, bytes); },
};
workerSelf.onmessage({ data: port });

// The wasm is compiled synchronously above and the bridge finishes its set-up in
// a promise callback, so it is ready once the current task ends: read stdin from
// the next one.
setImmediate(() => {
  process.stdin.on('data', (chunk) => {
    port.onmessage({ data: new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length) });
  });
  process.stdin.on('end', () => process.exit(0));
});
