/**
 * A long body (an export) streamed to a response as it is produced, at the pace the client
 * reads it: hyper-express pulls the next chunk only once the socket took the last one, so
 * the node holds one chunk per slow client, never the whole body.
 *
 * A failure mid-stream closes the connection without the chunked encoding's last chunk:
 * the client sees a broken transfer, never a short body that looks complete.
 */
import { Readable } from 'node:stream';
import type { Response } from 'hyper-express';

export function streamBody(res: Response, chunks: AsyncIterable<string>,
  onError: (error: unknown) => void): void {
  async function* guarded(): AsyncGenerator<Buffer> {
    try {
      for await (const text of chunks) yield Buffer.from(text, 'utf8');
    } catch (error) {
      onError(error);
      if (!res.completed) res.close();
    }
  }
  res.stream(Readable.from(guarded(), { highWaterMark: 1 })).catch((error: unknown) => {
    onError(error);
    if (!res.completed) res.close();
  });
}
