/** The parameter server: sharded embedding tables and dense tensors, pull and push, optimizers, checkpoints. */
package dev.ferry.ps;
