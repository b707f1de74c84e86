// The reference GraphQL implementation as GraphiQL and codegen use it.
//   node introspect.mjs query '<options JSON>'  prints getIntrospectionQuery(options)
//   node introspect.mjs build < result.json      builds the client schema from an introspection result
//                                                 (buildClientSchema, then validates it) and prints its SDL
import { readFileSync } from "node:fs";
import { assertValidSchema, buildClientSchema, getIntrospectionQuery, printSchema } from "graphql";

const [mode, options] = process.argv.slice(2);
if (mode === "query") {
  process.stdout.write(getIntrospectionQuery(options ? JSON.parse(options) : undefined));
} else if (mode === "build") {
  const result = JSON.parse(readFileSync(0, "utf8"));
  const schema = buildClientSchema(result.data);
  assertValidSchema(schema);
  process.stdout.write(printSchema(schema));
} else {
  process.stderr.write("usage: introspect.mjs query [options] | build < result.json\n");
  process.exit(2);
}
