/** Stylesheets imported for their side effect; Vite bundles them into the build's CSS. */
declare module '*.css';
