// ESLint flat config. Type-aware rules run on every TypeScript file; the purity rules below
// enforce DESIGN §5: src/api and src/core never read a clock, randomness, timers or I/O.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const impureGlobals = [
  { name: "setTimeout", message: "src/core and src/api are pure: time passes only in src/engine." },
  { name: "setInterval", message: "src/core and src/api are pure: time passes only in src/engine." },
  { name: "setImmediate", message: "src/core and src/api are pure: time passes only in src/engine." },
  { name: "process", message: "src/core and src/api are pure: no process state or I/O." },
  { name: "performance", message: "src/core and src/api are pure: no clock." },
  { name: "fetch", message: "src/core and src/api are pure: no I/O." },
];

export default tseslint.config(
  { ignores: ["node_modules/", ".cache/", "dist/"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      "@typescript-eslint/no-unnecessary-condition": ["error", { allowConstantLoopConditions: true }],
      "@typescript-eslint/consistent-type-imports": "error",
      "max-lines-per-function": ["warn", { max: 70, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Deterministic code: time comes from the Clock port, randomness from the seeded Rng.
    // The router's decisions (src/router/*.ts; its data plane lives in subfolders) too: the
    // simulator's traffic model runs the same functions on virtual time.
    files: ["src/core/**/*.ts", "src/api/**/*.ts", "src/engine/**/*.ts", "src/sim/**/*.ts", "src/router/*.ts"],
    rules: {
      "no-restricted-globals": ["error", ...impureGlobals],
      "no-restricted-syntax": [
        "error",
        {
          selector: "MemberExpression[object.name='Date'][property.name='now']",
          message: "Take time from the Clock port (or `now` as an argument in src/core).",
        },
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: "Take time from the Clock port (or `now` as an argument in src/core).",
        },
        {
          selector: "MemberExpression[object.name='Math'][property.name='random']",
          message: "Use the seeded Rng port.",
        },
        {
          selector: "ImportSpecifier[imported.name=/^random|^getRandomValues$|^webcrypto$/]",
          message: "Use the seeded Rng port.",
        },
      ],
    },
  },
  {
    files: ["src/core/**/*.ts", "src/api/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            // node:crypto stays allowed for hashing (a pure function of bytes); its random sources are not.
            {
              group: ["node:*", "!node:crypto", "fs", "path", "os", "child_process", "http", "https", "net"],
              message: "src/core and src/api are pure: no Node I/O modules.",
            },
            {
              group: ["**/engine/**", "**/sim/**", "**/kube/**", "**/cli/**", "**/router/**"],
              message: "Dependencies point inward (DESIGN §5).",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["src/router/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["node:*", "fs", "path", "os", "child_process", "http", "https", "net", "undici"],
              message: "The router's decisions are pure: I/O belongs to src/router/proxy/.",
            },
            {
              group: ["**/sim/**", "**/kube/**", "**/cli/**", "**/proxy/**"],
              message: "Dependencies point inward (DESIGN §5).",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["src/engine/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/sim/**", "**/kube/**", "**/cli/**", "**/router/**"],
              message: "The engine depends only on its ports and the core (DESIGN §5).",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["**/*.test.ts", "test/**/*.ts"],
    rules: {
      "max-lines-per-function": "off",
      "@typescript-eslint/no-floating-promises": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
      // Tests build and mutate untyped JSON fixtures (manifests as users write them).
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-confusing-void-expression": "off",
    },
  },
  {
    files: ["eslint.config.js"],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The dashboard's page: plain browser JavaScript, served as is (no build step, no types).
    files: ["web/**/*.js"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: "script",
      globals: { document: "readonly", window: "readonly", EventSource: "readonly" },
    },
  },
);
