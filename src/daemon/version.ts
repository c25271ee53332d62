/** Weft's version (kept in step with package.json by test/cli/version.test.ts). */
export const WEFT_VERSION = '0.1.0';
