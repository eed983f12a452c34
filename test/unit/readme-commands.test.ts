/**
 * The reader of the README's shell commands (test/helpers/readme-commands.ts): what it reads
 * as a shell would, and the constructs it refuses instead of misreading.
 */
import { describe, expect, it } from 'vitest';
import { bashBlocks, curlRequest, shellCommands } from '../helpers/readme-commands.js';

describe('shellCommands', () => {
  it('joins continued lines and keeps a single-quoted string across lines', () => {
    const [command, ...rest] = shellCommands(
      "curl -s -X POST http://h/x -H 'a: b' \\\n  -d '{\"x\":[\n  1]}'   # a note\n");
    expect(command).toMatchObject({ words: ['curl', '-s', '-X', 'POST', 'http://h/x', '-H',
      'a: b', '-d', '{"x":[\n  1]}'], background: false, comment: 'a note' });
    expect(rest).toHaveLength(0);
  });

  it('reads leading assignments apart from the command, and a trailing &', () => {
    const [command] = shellCommands('A=1 B=x=y npx hivekv serve --port 1 \\\n  --join &\n');
    expect(command).toMatchObject({ env: { A: '1', B: 'x=y' },
      words: ['npx', 'hivekv', 'serve', '--port', '1', '--join'], background: true });
  });

  it('keeps $(...) as text, and skips comment lines', () => {
    expect(shellCommands('# only a comment\nexport S=$(openssl rand -hex 32)  # why\n'))
      .toMatchObject([{ words: ['export', 'S=$(openssl rand -hex 32)'], comment: 'why' }]);
  });

  it('reads > file and < file', () => {
    expect(shellCommands('hivekv export --data d > dump.ndjson   # a dump\n' +
      'hivekv import --data ./r <dump.ndjson\n')).toMatchObject([
      { words: ['hivekv', 'export', '--data', 'd'], stdoutFile: 'dump.ndjson',
        stdinFile: undefined, comment: 'a dump' },
      { words: ['hivekv', 'import', '--data', './r'], stdinFile: 'dump.ndjson',
        stdoutFile: undefined }]);
  });

  it('refuses what it does not read: pipes, &&, a bare >, variables, open quotes', () => {
    for (const text of ['a | b', 'a && b', 'a >', 'echo $X', "echo 'open", 'a; b',
      'echo "$X"', 'a & b']) {
      expect(() => shellCommands(text), text).toThrow(/line 1/);
    }
  });
});

describe('curlRequest', () => {
  it('reads the method, headers, body and -i', () => {
    expect(curlRequest(['curl', '-si', 'http://h/p', '-H', 'Content-Type: a/b', '-d', '{}']))
      .toEqual({ method: 'POST', url: 'http://h/p', headers: { 'content-type': 'a/b' },
        body: '{}', showHeaders: true });
    expect(curlRequest(['curl', '-s', '-X', 'DELETE', 'http://h/p'])).toMatchObject({
      method: 'DELETE', body: undefined, showHeaders: false });
  });

  it('refuses an option it does not know', () => {
    expect(() => curlRequest(['curl', '--data-binary', '@f', 'http://h/'])).toThrow(/option/);
  });
});

describe('bashBlocks', () => {
  it('takes the bash blocks of one section only', () => {
    const md = '# T\n\n## A\n\n```bash\none\n```\n\n```json\n{}\n```\n\n' +
      '## B\n\n```bash\ntwo\n```\n';
    expect(bashBlocks(md, '## A', '## B')).toEqual(['one\n']);
  });
});
