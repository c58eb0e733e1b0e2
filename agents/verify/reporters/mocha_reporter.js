// agentlab: a mocha reporter that prints like `spec` (the project's own mocha, when it can be found) and writes every
// test's file, suite titles and outcome as JSON to `--reporter-option output=<file>`.
'use strict';
const fs = require('fs');

let Base = Object;
for (const from of [process.cwd(), __dirname]) {
  try {
    Base = require(require.resolve('mocha', { paths: [from] })).reporters.Spec;
    break;
  } catch (err) {
    // not found from there
  }
}

class AgentlabReporter extends Base {
  constructor(runner, options) {
    super(runner, options);
    const settings = (options && (options.reporterOption || options.reporterOptions)) || {};
    const records = [];
    const record = (test, state, err) => {
      const item = { file: test.file || '', titles: test.titlePath(), state };
      if (err) {
        item.message = String((err && err.message) || err);
        item.stack = String((err && err.stack) || '');
      }
      records.push(item);
    };
    runner.on('pass', (test) => record(test, 'passed'));
    runner.on('fail', (test, err) => record(test, 'failed', err));
    runner.on('pending', (test) => record(test, 'skipped'));
    runner.once('end', () => {
      if (settings.output) fs.writeFileSync(settings.output, JSON.stringify(records));
    });
  }
}

module.exports = AgentlabReporter;
