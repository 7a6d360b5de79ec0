// Step prices for tests of the slot loop's mechanics (server/engine/step-costs.ts): fixed, not measured, so
// that which guesses a step keeps does not depend on how fast this machine decoded the last steps.
import { StepCosts, UnpricedStepCosts } from "../../server/engine/step-costs.js";

export class FixedStepCosts extends StepCosts {
  /** `price`: a pass's cost by its size; null: nothing priced, so every guess is kept (the loop before pricing). */
  constructor(private readonly price: ((size: number) => number) | null) {
    super();
  }
  override record(): void {}
  override mayExplore(): boolean {
    return false;
  }
  override pass(size: number): number | null {
    return this.price ? this.price(size) : null;
  }
}

/** Every guess kept: for tests of how guesses are decoded and checked. */
export const keepAllGuesses = () => new UnpricedStepCosts();
