/* Start the console once the page's elements exist (a file, not an inline script: the page's
 * Content-Security-Policy allows scripts from this origin only). */
mk.start();
