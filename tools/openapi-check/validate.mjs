// Validates an OpenAPI document against the official OpenAPI 3.1 schema; exits 1 with the
// errors when it is not valid. Usage: node validate.mjs docs/openapi.json
import { Validator } from "@seriousme/openapi-schema-validator";

const path = process.argv[2];
const validator = new Validator();
const result = await validator.validate(path);
if (validator.version !== "3.1") {
  console.error(`${path}: OpenAPI ${validator.version}, expected 3.1`);
  process.exit(1);
}
if (!result.valid) {
  console.error(`${path} is not a valid OpenAPI 3.1 document:`);
  console.error(JSON.stringify(result.errors, null, 2));
  process.exit(1);
}
console.log(`${path}: a valid OpenAPI ${validator.version} document`);
