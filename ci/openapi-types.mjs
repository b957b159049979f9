#!/usr/bin/env node
// The TypeScript types of the REST API, generated from its OpenAPI document with openapi-typescript.
//
//   jlpm types:generate   # (re)writes src/api.generated.ts from clustermgr_lab/web/openapi.json
//   jlpm types:check      # fails while the committed src/api.generated.ts differs from a fresh generation
//
// src/types.ts names the shapes the sidebar uses after the generated schemas; edit the OpenAPI
// document, never the generated file. `make lint` runs the check.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import openapiTS, { astToString } from 'openapi-typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = 'clustermgr_lab/web/openapi.json';
const TARGET = 'src/api.generated.ts';
const GENERATE = 'jlpm types:generate';

/** What the generator makes of the OpenAPI document now, header included. */
async function generate() {
  const generator = JSON.parse(
    fs.readFileSync(
      path.join(ROOT, 'node_modules/openapi-typescript/package.json'),
      'utf8'
    )
  );
  const ast = await openapiTS(pathToFileURL(path.join(ROOT, SOURCE)), {
    // A property with a `default` (e.g. Adapt.unit) stays optional: requests may leave it out.
    defaultNonNullable: false
  });
  const header = [
    '/**',
    ` * Generated from ${SOURCE} by openapi-typescript ${generator.version}.`,
    ' *',
    ` * Do not edit: change the OpenAPI document, then run \`${GENERATE}\`.`,
    ' * `jlpm types:check` (part of `make lint`) fails while this file is out of date.',
    ' * src/types.ts gives these types the names the rest of src/ uses.',
    ' */',
    '',
    ''
  ].join('\n');
  return header + astToString(ast);
}

/** The first line where `committed` and `fresh` differ, shown side by side. */
function firstDifference(committed, fresh) {
  const a = committed.split('\n');
  const b = fresh.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      const shown = line =>
        line === undefined ? '(end of file)' : line.trim();
      return `first difference at line ${i + 1}:\n  committed: ${shown(a[i])}\n  generated: ${shown(b[i])}`;
    }
  }
  return 'they differ in line endings only';
}

async function main() {
  const check = process.argv.includes('--check');
  const fresh = await generate();
  const target = path.join(ROOT, TARGET);
  if (!check) {
    fs.writeFileSync(target, fresh, 'utf8');
    console.log(`wrote ${TARGET} from ${SOURCE}`);
    return;
  }
  if (!fs.existsSync(target)) {
    console.error(
      `${TARGET} is missing. Run \`${GENERATE}\` and commit the result.`
    );
    process.exit(1);
  }
  const committed = fs.readFileSync(target, 'utf8');
  if (committed.replace(/\r\n/g, '\n') !== fresh) {
    console.error(
      `${TARGET} is out of date with ${SOURCE} (${firstDifference(committed, fresh)}).\n` +
        `Run \`${GENERATE}\` and commit the result; fix src/types.ts where the build then fails.`
    );
    process.exit(1);
  }
  console.log(`${TARGET} is up to date with ${SOURCE}`);
}

main().catch(error => {
  console.error(
    `generating ${TARGET} from ${SOURCE} failed: ${error.stack ?? error}`
  );
  process.exit(1);
});
