"""LLVM IR: one model of a module with its control-flow graph, and the calls
the front end leaves for code generation to resolve."""
