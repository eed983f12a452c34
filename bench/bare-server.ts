/**
 * The ceiling of this machine for one HTTP call: hyper-express reading the request body and
 * answering a fixed JSON body, with nothing behind it. `node-load.ts` measures every workload
 * of the node against this in the same run. Prints `{"port":N}` once listening.
 */
import HyperExpress from 'hyper-express';

const FIXED_ANSWER = '{"results":[{"index":0,"op":"get","found":false,"key":"k1"}]}';

const server = new HyperExpress.Server({ max_body_length: 64 * 1024 * 1024 });
server.post('/api/v1/kv', async (request, response) => {
  await request.text();
  response.type('json').send(FIXED_ANSWER);
});
await server.listen(0, '127.0.0.1');
console.log(JSON.stringify({ port: server.port }));
process.on('SIGTERM', () => process.exit(0));
