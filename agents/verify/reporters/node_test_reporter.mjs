// agentlab: node's built-in test runner reporter writing one JSON line per test (file, suite titles, outcome), so
// the bot keys tests by file and describe names. Used with --test-reporter-destination=<file>.
export default async function* agentlabReporter(source) {
  const stacks = new Map(); // file -> names of the tests started at each nesting level
  for await (const event of source) {
    const data = event.data || {};
    const file = data.file || '';
    if (event.type === 'test:start' || event.type === 'test:dequeue') {
      const stack = stacks.get(file) || [];
      stack.length = data.nesting;
      stack[data.nesting] = data.name;
      stacks.set(file, stack);
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const details = data.details || {};
    if (details.type === 'suite' && event.type === 'test:pass') continue;
    if (event.type === 'test:fail' && details.error && details.error.failureType === 'subtestsFailed') continue;
    const stack = (stacks.get(file) || []).slice(0, data.nesting);
    const titles = [...stack, data.name];
    let state = event.type === 'test:pass' ? 'passed' : 'failed';
    if (data.skip !== undefined || data.todo !== undefined) state = state === 'passed' ? 'skipped' : state;
    const record = { file, titles, state };
    if (state === 'failed') {
      const error = details.error || {};
      const cause = error.cause || error;
      record.message = String((cause && cause.message) || error.message || error);
      record.stack = String((cause && cause.stack) || error.stack || '');
      if (details.type === 'suite') record.suite = true;
    }
    yield JSON.stringify(record) + '\n';
  }
}
