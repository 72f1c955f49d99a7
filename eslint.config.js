// Type-aware rules matter most here: a floating promise in a stream-heavy server is a lost error.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.testenv/', 'testenv/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's test() returns a promise the runner itself awaits.
        { allowForKnownSafeCalls: [{ from: 'package', name: ['test', 'it', 'describe', 'suite'], package: 'node:test' }] },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // Every worker thread loads src/ again, so what an import loads is paid once per thread.
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'undici',
              message: 'Its entry point loads all of undici in every thread: take what you need from src/upstream/undici.ts.',
              allowTypeImports: true,
            },
            {
              name: 'node:http',
              message:
                "An ES import of node:http reads every export, and its WebSocket getter loads Node's bundled undici in every thread: use process.getBuiltinModule('node:http').",
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['.dependency-cruiser.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, sourceType: 'commonjs', globals: { module: 'writable' } },
  },
);
