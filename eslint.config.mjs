// @ts-check
// ESLint (flat config): eslint's and typescript-eslint's recommended rules, without type information (fast), and
// eslint-config-prettier last, so no rule argues with the formatter (prettier owns layout). `npm run lint` runs it
// with `prettier --check`. A rule is off here only where the code means what the rule warns about.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** What Node gives a script (.mjs files are not type-checked, so eslint must be told). */
const nodeGlobals = Object.fromEntries(
  [
    'process',
    'console',
    'Buffer',
    'URL',
    'URLSearchParams',
    'TextEncoder',
    'TextDecoder',
    'AbortController',
    'AbortSignal',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'setImmediate',
    'clearImmediate',
    'queueMicrotask',
    'structuredClone',
    'fetch',
    'performance',
    'globalThis',
  ].map((name) => [name, 'readonly']),
);

export default tseslint.config(
  { ignores: ['out/', 'dist/', 'node_modules/', '.cache/', 'media/', 'test-artifacts/', '.sw4rm/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // Unused names are mistakes, but a leading underscore says "on purpose" (a rest sibling dropped, an argument kept).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // A timer handle declared before the callback that disposes it and assigned after: `const` would be read too early.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // The code refuses and strips control characters on purpose (field limits, logs, terminal output).
      'no-control-regex': 'off',
      // A value set before a `try` that may replace it is the fallback when the `try` throws.
      'no-useless-assignment': 'off',
      // The CLI and the editor print their own message for a failure; a `cause` would change what they print.
      'preserve-caught-error': 'off',
    },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { globals: nodeGlobals },
  },
  {
    // bin.ts checks the Node version before main loads: main is reached by a require() that runs only then.
    files: ['src/cli/bin.ts'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Tests match aligned console columns.
    files: ['test/**'],
    rules: { 'no-regex-spaces': 'off' },
  },
  {
    // The unit rung's guard patches node:child_process and node:net themselves, which only `import x = require()` reaches.
    files: ['test/support/unitRung.ts'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // InProcessCoordinatorApi's members are put on each instance by its sections (compose): the interface of the same
    // name declares them, on purpose.
    files: ['src/core/api/inProcessApi.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-declaration-merging': 'off',
      '@typescript-eslint/no-empty-object-type': 'off',
    },
  },
  prettier,
);
